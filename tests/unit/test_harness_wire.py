"""What the harness's runner puts on the wire: each step's body is its op's
protocol model, as :func:`agentenv.protocol.request_dump` writes it.

The steps run through the runner's own handlers (``Run._do``) against a
computer whose one way out, ``Computer._request``, is replaced by a recorder
of what it was given; nothing is deployed. Each body is held both to the
model's dump and to the literal JSON, so that a change of either shows here.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import ValidationError

from agentenv.app.app_server import RECORDING_OPS
from agentenv.app.optable import DATA_OPS, OPS, PROFILE_OPS, SCOPE_OPS
from agentenv.harness import attest
from agentenv.harness.batch import Batch
from agentenv.harness.computer import Computer, ComputerError
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.run_store import RunStore, StoreOptions
from agentenv.harness.runner import EXIT_INFRA, Run
from agentenv.harness.steps import Task
from agentenv.harness.task_sources import Planned
from agentenv.protocol import problems, request_dump
from agentenv.protocol.answers import ANSWERS, BINARY, RECORDING_ANSWERS
from agentenv.protocol.attestation import key_text, sha256
from agentenv.protocol.browser import (
    CookiesDelete,
    CookiesSet,
    LocalStorageClear,
    LocalStorageSet,
    Navigate,
    RequestHuman,
    ScopeOnly,
    TabRef,
    TabsOpen,
)
from agentenv.protocol.card import (
    BROWSER_RECORDING_V1,
    BROWSER_V1,
    Attestation,
    Card,
    Extension,
)
from agentenv.protocol.recording import End, Start, rebuild
from agentenv.recorder.provenance import sign_manifest

#: The computer's key: the recordings the Folder store holds are signed with it.
SIGNER = Ed25519PrivateKey.generate()
CARD = Card(
    name="wire",
    versions={},
    attestation=Attestation(key=key_text(SIGNER)),
    extensions={
        BROWSER_V1: Extension(
            ops=[
                "tabs/list",
                "tabs/open",
                "tabs/close",
                "tabs/activate",
                "navigate",
                "cookies/set",
                "cookies/delete",
                "local_storage/set",
                "local_storage/clear",
                "data/get",
                "request_human",
                "scopes/open",
                "scopes/close",
            ],
            params=["scope"],
        ),
        BROWSER_RECORDING_V1: Extension(ops=["start", "end", "end_all"], params=["scope"]),
    },
)
SHOP = "https://shop.example/"
TAB = {"id": "T1", "url": SHOP, "title": "Shop", "active": True}


class Wire(Computer):
    """A computer that answers from ``answers`` (by path) and keeps what it was sent."""

    def __init__(self, answers: dict[str, Any]) -> None:
        super().__init__("http://computer.test", "http://computer.test:9222", "control")
        self._card = CARD
        self.answers = answers
        self.sent: list[tuple[str, bytes]] = []
        self.waited: list[float] = []

    def _request(
        self, path: str, body: Any = None, raw: bytes | None = None, wait_s: float = 180
    ) -> tuple[bytes, str]:
        assert raw is None
        self.waited.append(wait_s)
        self.sent.append((path, json.dumps(body or {}).encode()))  # what _request writes
        found = self.answers.get(path, {})
        if isinstance(found, ComputerError):
            raise found
        if isinstance(found, bytes):
            return found, "application/gzip"
        return json.dumps(found).encode(), "application/json"

    def bodies(self) -> list[tuple[str, Any]]:
        return [(path, json.loads(data)) for path, data in self.sent]


class Folder:
    """A store that grants a folder and holds a recording of no frames, its
    empty log signed by :data:`SIGNER` (the recording's files are not the
    point here)."""

    where = "file:///recordings"

    def grant(self, key: str, *, started_here: bool, seconds: int = 0) -> dict[str, Any]:
        return {"url": f"{self.where}/{key}", "endpoint_url": None}

    def fetch(self, key: str, recording_id: str, folder: Path) -> tuple[list[str], list[str]]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "log.jsonl").write_bytes(b"")
        manifest = rebuild(recording_id, [], 0).model_copy(
            update={"rebuilt": False, "files": {"log.jsonl": sha256(b"")}}
        )
        (folder / "manifest.json").write_bytes(sign_manifest(manifest, SIGNER)[1])
        return ["log.jsonl", "manifest.json"], []

    def close(self) -> None:
        return


class Stores(RunStore):
    def __init__(self, out: Path) -> None:
        super().__init__(StoreOptions(spec="file"), out)
        self._store = Folder()


def _run(tmp_path: Path, steps: list[dict[str, Any]], computer: Wire) -> tuple[Run, list[Any]]:
    envs = {"shop": {"versions": {1: {"browsers": ["main"]}}}}
    task = Task.model_validate({"envs": envs, "steps": steps})
    run = Run(task, tmp_path, run_id="r1", stores=Stores(tmp_path))
    run.computers["shop"] = computer
    attest.pin(run.metadata, "shop", computer.public_key())  # as deploy_env pins it
    return run, list(task.steps)


def test_each_step_sends_its_ops_model_as_dumped(tmp_path: Path) -> None:
    cookie = {"name": "sid", "value": "s3cret", "domain": "shop.example", "path": "/"}
    steps: list[dict[str, Any]] = [
        {"type": "browser_set_cookies", "cookies": [cookie]},
        {"type": "browser_delete_cookies", "name": "sid"},
        {"type": "browser_set_local_storage", "origin": "https://Shop.example:443/", "items": {}},
        {"type": "browser_clear_local_storage"},
        {"type": "browser_open_tab", "url": SHOP},
        {"type": "browser_close_tab", "url": SHOP},
        {"type": "snapshot_env"},
    ]
    computer = Wire(
        {
            "/v1/browser/cookies/delete": {"deleted": 1},
            "/v1/browser/tabs/open": {"id": "T1"},
            "/v1/browser/tabs/list": [TAB],
            "/v1/browser/data/get": b"archive",
        }
    )
    run, parsed = _run(tmp_path, [{"env_id": "shop", **s} for s in steps], computer)
    results = [run._do(step) for step in parsed]
    assert results[1] == {"deleted": 1} and results[4] == {"tab": "T1"}
    assert results[5] == {"tab": "T1"}
    assert (tmp_path / "snapshot-shop.tar.gz").read_bytes() == b"archive"

    models = [
        CookiesSet.model_validate({"cookies": [cookie]}),
        CookiesDelete(name="sid"),
        LocalStorageSet(origin="https://shop.example", items={}),
        LocalStorageClear(),
        ScopeOnly(),  # the tabs it has: not only a blank one, so a tab is opened
        TabsOpen(url=SHOP),
        ScopeOnly(),
        TabRef(id="T1"),
        ScopeOnly(),
    ]
    literal = [
        {"cookies": [cookie]},
        {"name": "sid"},
        {"origin": "https://shop.example", "items": {}},  # as the computer reads it
        {},
        {},
        {"url": SHOP},  # the model's defaults are not sent: the computer fills them in
        {},
        {"id": "T1"},
        {},
    ]
    ops = [
        "cookies/set",
        "cookies/delete",
        "local_storage/set",
        "local_storage/clear",
        "tabs/list",
        "tabs/open",
        "tabs/list",
        "tabs/close",
        "data/get",
    ]
    sent = computer.bodies()
    assert [path for path, _ in sent] == [f"/v1/browser/{op}" for op in ops]
    assert [body for _, body in sent] == [request_dump(m) for m in models] == literal


def test_the_first_tab_step_shows_its_url_in_the_blank_tab_a_browser_starts_with(
    tmp_path: Path,
) -> None:
    """A fresh computer or scope has one blank tab: the first
    ``browser_open_tab`` shows its URL there (``navigate``, the blank tab's
    id as the step's), so the agent's first page is the task's; a second
    one, or one in the background, opens a tab."""
    blank = {"id": "B1", "url": "about:blank", "title": "", "active": True}
    computer = Wire(
        {
            "/v1/browser/tabs/list": [blank],
            "/v1/browser/navigate": {"tab": "B1", "url": SHOP},
            "/v1/browser/tabs/open": {"id": "T2"},
        }
    )
    steps: list[dict[str, Any]] = [
        {"type": "browser_open_tab", "url": SHOP},
        {"type": "browser_open_tab", "url": SHOP + "next"},
    ]
    run, parsed = _run(tmp_path, [{"env_id": "shop", **s} for s in steps], computer)
    assert [run._do(step) for step in parsed] == [{"tab": "B1"}, {"tab": "T2"}]
    sent = computer.bodies()
    assert [path for path, _ in sent] == [
        "/v1/browser/tabs/list",
        "/v1/browser/navigate",
        "/v1/browser/tabs/open",
    ]
    assert sent[1][1] == request_dump(Navigate(url=SHOP, tab="B1"))
    # In the background, the first one opens a tab too: the blank one stays in front.
    computer = Wire({"/v1/browser/tabs/list": [blank], "/v1/browser/tabs/open": {"id": "T3"}})
    steps = [{"type": "browser_open_tab", "url": SHOP, "background": True}]
    run, parsed = _run(tmp_path / "bg", [{"env_id": "shop", **s} for s in steps], computer)
    assert run._do(parsed[0]) == {"tab": "T3"}
    assert [path for path, _ in computer.bodies()] == ["/v1/browser/tabs/open"]


def test_a_scoped_recording_sends_start_and_end_as_their_models(tmp_path: Path) -> None:
    # A whole recording of no frames: its log, and the end's reason.
    manifest = rebuild("rec-1", [], 2).model_copy(update={"reason": "completed"})
    computer = Wire(
        {
            "/v1/browser-recording/start": {"recording_id": "rec-1"},
            "/v1/browser-recording/end": manifest.model_dump(mode="json"),  # as the recorder
            "/v1/browser/tabs/list": [TAB],
        }
    )
    steps: list[dict[str, Any]] = [
        {"type": "browser_connect_cdp", "env_id": "shop", "agent": "alice"},
        {"type": "browser_connect_cdp", "env_id": "shop", "agent": "bob"},
        {"type": "start_browser_recording", "env_id": "shop", "agent": "alice", "name": "rec"},
        {"type": "browser_activate_tab", "env_id": "shop", "agent": "alice", "url": SHOP},
        {"type": "end_browser_recording", "env_id": "shop", "name": "rec"},
    ]
    run, parsed = _run(tmp_path, steps, computer)
    started = run._do(parsed[2])
    assert started is not None and started["recording_id"] == "rec-1"
    run._do(parsed[3])
    ended = run._do(parsed[4])
    assert ended is not None and ended["problems"] == []

    upload = {"url": "file:///recordings/r1/rec"}  # the grant's None left out
    start = {"request_id": "r1-rec", "upload": upload, "frames": True, "name": "rec"}
    literal = [
        {**start, "scope": "alice"},
        {"scope": "alice"},
        {"scope": "alice", "id": "T1"},
        {"recording_id": "rec-1", "upload": upload, "reason": "completed"},
    ]
    models = [
        Start.model_validate({**start, "scope": "alice"}),
        ScopeOnly(scope="alice"),
        TabRef(scope="alice", id="T1"),
        End.model_validate(literal[3]),
    ]
    sent = computer.bodies()
    paths = ["browser-recording/start", "browser/tabs/list", "browser/tabs/activate"]
    assert [p for p, _ in sent] == [f"/v1/{p}" for p in [*paths, "browser-recording/end"]]
    assert [body for _, body in sent] == [request_dump(m) for m in models] == literal
    # The bytes: the model's field order (scope, inherited, first), not the step's.
    assert computer.sent[2][1] == b'{"scope": "alice", "id": "T1"}'


def test_a_body_the_computer_would_refuse_is_its_400_and_is_not_sent(tmp_path: Path) -> None:
    """No cookie to set (preflight lets it by): the computer's model refuses
    it, so the harness does, in the words and with the status the computer's
    answer would have (app/app_server.py's parse)."""
    computer = Wire({})
    run, parsed = _run(
        tmp_path, [{"type": "browser_set_cookies", "env_id": "shop", "cookies": []}], computer
    )
    with pytest.raises(StepFailed) as refused:
        run._do(parsed[0])
    with pytest.raises(ValidationError) as server:
        CookiesSet.model_validate({"cookies": []})
    words = "; ".join(problems(server.value))
    assert words.startswith("cookies: ")
    assert str(refused.value) == f"/v1/browser/cookies/set: {words}"
    assert not refused.value.infrastructure and computer.sent == []


def test_tabs_that_are_not_tabs_are_the_computers_failure(tmp_path: Path) -> None:
    computer = Wire({"/v1/browser/tabs/list": [{"id": "T1"}]})
    run, parsed = _run(
        tmp_path, [{"type": "browser_close_tab", "env_id": "shop", "url": SHOP}], computer
    )
    with pytest.raises(StepFailed) as failed:
        run._do(parsed[0])
    said = str(failed.value)
    assert failed.value.infrastructure and "is not what this harness reads" in said
    assert "0.url: Field required" in said and "of the same version" in said, said
    assert [p for p, _ in computer.bodies()] == ["/v1/browser/tabs/list"]  # no close


def test_an_answer_its_model_does_not_read_is_the_computers_failure(tmp_path: Path) -> None:
    """cookies/delete answering a count under another name (an older or
    newer computer): the step fails as infrastructure, naming the field."""
    computer = Wire({"/v1/browser/cookies/delete": {"removed": 2}})
    run, parsed = _run(
        tmp_path, [{"type": "browser_delete_cookies", "env_id": "shop", "name": "sid"}], computer
    )
    with pytest.raises(StepFailed) as failed:
        run._do(parsed[0])
    assert failed.value.infrastructure and "deleted: Field required" in str(failed.value)
    computer.answers["/v1/browser/cookies/delete"] = {"deleted": 2, "said": "more"}
    assert run._do(parsed[0]) == {"deleted": 2}  # a field it does not know passes


def test_every_op_a_computer_serves_has_the_model_its_answer_is_read_by() -> None:
    served = set(OPS) | set(DATA_OPS) | set(SCOPE_OPS) | set(PROFILE_OPS) | {"log"}
    assert served == set(ANSWERS) | BINARY and not set(ANSWERS) & BINARY
    assert set(RECORDING_ANSWERS) == set(RECORDING_OPS)


def test_a_run_alone_and_a_batch_make_the_same_store(tmp_path: Path) -> None:
    """One place makes a run's store (RunStore.of): a single task and a
    batch pass it the same settings."""
    options = StoreOptions(spec="file", network="net")
    task = Task.model_validate({"steps": [{"type": "run_agent", "command": ["true"]}]})
    where: dict[str, Any] = {"backend": "kubernetes", "namespace": "ns", "kube_context": "ctx"}
    alone = Run(task, tmp_path, store_options=options, **where)._stores()
    batch = Batch([], tmp_path, store_options=options, **where)._stores()
    for made in (alone, batch):
        assert (made.options, made.out, made.backend) == (options, tmp_path, "kubernetes")
        assert (made.namespace, made.kube_context) == ("ns", "ctx")


def test_a_recording_asks_for_video_har_and_downloads_only_of_a_computer_that_takes_them(
    tmp_path: Path,
) -> None:
    step = {
        "type": "start_browser_recording",
        "env_id": "shop",
        "name": "rec",
        "video": {"fps": 5},
        "har": {"bodies": True},
        "downloads": True,
    }
    newer = Wire({"/v1/browser-recording/start": {"recording_id": "rec-2"}})
    newer._card = CARD.model_copy(
        update={
            "extensions": {
                **CARD.extensions,
                BROWSER_RECORDING_V1: Extension(
                    ops=["start", "end", "end_all"],
                    params=["scope", "video", "har", "downloads"],
                ),
            }
        }
    )
    run, parsed = _run(tmp_path, [step], newer)
    run._do(parsed[0])
    sent = dict(newer.bodies())["/v1/browser-recording/start"]
    assert (sent["video"], sent["har"], sent["downloads"]) == ({"fps": 5}, {"bodies": True}, True)
    older = Wire({"/v1/browser-recording/start": {"recording_id": "rec-3"}})
    run, parsed = _run(tmp_path / "older", [step], older)
    with pytest.raises(StepFailed, match="takes no 'video'"):
        run._do(parsed[0])
    assert older.bodies() == []  # nothing sent to a computer that would refuse it


def test_a_card_from_a_newer_computer_is_read() -> None:
    """A field a newer computer's card adds (as attestation once was) is
    passed over, in the card and in each extension."""
    from agentenv.protocol.card import Card

    card = Card.model_validate(
        {
            "name": "agentenv",
            "versions": {"agentenv": "9"},
            "extensions": {"browser/v1": {"ops": ["tabs/list"], "quotas": {"x": 1}}},
            "attestation": {"key": "ed25519:AAAA", "algorithm": "ed25519"},
            "something_new": True,
        }
    )
    assert card.serves("browser/v1", "tabs/list")
    assert card.attestation is not None and card.attestation.key == "ed25519:AAAA"


def test_a_task_whose_worker_raised_is_infrastructure_with_its_cause(tmp_path: Path) -> None:
    """A bug or a full disk in one task's worker: it ran, so it is never
    written "not run"; the batch says why and exits as infrastructure."""

    class Broken(Batch):
        def _one(self, planned: Planned) -> None:
            if planned.name == "bad":
                raise OSError(28, "No space left on device")
            self.results[planned.name] = {"task": planned.name, "status": "done"}

    task = Task.model_validate({"steps": [{"type": "run_agent", "command": ["true"]}]})
    said = io.StringIO()
    batch = Broken(
        [Planned("good", task, "a.yaml"), Planned("bad", task, "b.yaml")],
        tmp_path,
        parallel=2,
        stream=said,
    )
    assert batch.run() == EXIT_INFRA
    results = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert results[0] == {"task": "good", "status": "done"}
    assert results[1]["status"] == "infrastructure"
    assert "OSError: [Errno 28] No space left on device" in results[1]["failures"][0]
    assert "bad: infrastructure (the harness failed running it" in said.getvalue()
    assert "1 done, 0 failed, 1 infrastructure, 0 not run" in said.getvalue()


def test_wait_for_human_asks_in_the_agents_scope_and_a_persons_word_decides(
    tmp_path: Path,
) -> None:
    """``request_human`` as its model dumps it, awaited past its own timeout;
    ``done`` passes with who said it, ``cannot`` and no answer fail the task
    (not infrastructure)."""
    step = {"env_id": "shop", "type": "wait_for_human", "reason": "solve the code", "timeout_s": 90}
    said = {"word": "done", "who": "carol", "note": None}
    computer = Wire({"/v1/browser/request_human": said})
    run, parsed = _run(tmp_path, [step], computer)
    assert run._do(parsed[0]) == said
    ((path, body),) = computer.bodies()
    assert path == "/v1/browser/request_human"
    assert body == request_dump(RequestHuman(reason="solve the code", timeout_s=90))
    assert computer.waited == [120.0]  # its timeout and the slack: never cut short

    computer.answers["/v1/browser/request_human"] = {**said, "word": "cannot", "note": "no code"}
    with pytest.raises(StepFailed) as failed:
        run._do(parsed[0])
    assert str(failed.value) == "carol (a person) answered cannot: no code"
    assert not failed.value.infrastructure
    # No person in time: the computer's 504, the task's failure all the same.
    late = "/v1/browser/request_human: no person answered within 90 s: the request is withdrawn"
    computer.answers["/v1/browser/request_human"] = ComputerError(late, 504)
    with pytest.raises(StepFailed) as failed:
        run._do(parsed[0])
    assert "no person answered within 90 s" in str(failed.value)
    assert not failed.value.infrastructure


def test_a_task_that_waits_for_a_person_opens_its_scope_with_one(tmp_path: Path) -> None:
    """On scopes: ``scopes/open {person}``, and while the step waits, the
    live view's address with the person's token in a 0600 file of the
    task's folder (removed after), never printed."""
    import os
    import stat

    from agentenv.harness.human_steps import ADDRESS_FILE, wait_for_human
    from agentenv.harness.scoped import asks_for_person, close_for, open_for
    from agentenv.harness.steps import WaitForHuman

    person_token = "scope-" + "p" * 43
    seen: list[tuple[str, int]] = []

    class Host(Wire):
        def _request(
            self, path: str, body: Any = None, raw: bytes | None = None, wait_s: float = 180
        ) -> tuple[bytes, str]:
            if path.endswith("/request_human"):
                file = tmp_path / ADDRESS_FILE
                seen.append((file.read_text(), stat.S_IMODE(os.stat(file).st_mode)))
            return super()._request(path, body, raw, wait_s)

    host = Host(
        {
            "/v1/browser/scopes/open": {
                "scope": "s1",
                "token": "scope-" + "a" * 43,
                "cdp_url": "ws://computer.test:9222/devtools/browser",
                "mcp_url": "http://computer.test/mcp",
                "person_token": person_token,
                "live_url": "http://computer.test/live",
            },
            "/v1/browser/request_human": {"word": "done", "who": "person@s1", "note": None},
        }
    )
    step = WaitForHuman(type="wait_for_human", env_id="shop", reason="the code", timeout_s=60)
    task = Task.model_validate(
        {"envs": {"shop": {"versions": {1: {"browsers": ["main"]}}}}, "steps": [step]}
    )
    assert asks_for_person(task) and not asks_for_person(task.model_copy(update={"steps": []}))
    scoped = open_for(host, ["main"], person=True)
    assert host.bodies()[0] == ("/v1/browser/scopes/open", {"person": "person"})
    scoped._request = host._request  # type: ignore[method-assign]  # the same computer
    said = io.StringIO()
    waits = task.steps[0]
    assert isinstance(waits, WaitForHuman)
    answered = wait_for_human(scoped, None, waits, lambda x: print(x, file=said), tmp_path)
    assert answered["who"] == "person@s1"
    assert seen == [(f"http://computer.test/live?token={person_token}\n", 0o600)]
    assert not (tmp_path / ADDRESS_FILE).exists()
    assert str(tmp_path / ADDRESS_FILE) in said.getvalue()
    assert person_token not in said.getvalue()
    assert host.bodies()[1] == (
        "/v1/browser/request_human",
        {"scope": "s1", "reason": "the code", "timeout_s": 60.0},
    )
    close_for(scoped)
    assert not scoped.people
