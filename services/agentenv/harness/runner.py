"""A run: a task's steps in order, against its computers, leaving a folder of artifacts.

Each step's start, end, duration and outcome go to the terminal; a summary
closes the run; ``metadata.json`` records what each step did, by step id.
Exit status: 0 done, 1 the task failed (the agent, or a step the task asked
for could not be done), 2 the task file is wrong (nothing deployed), 3 an
infrastructure failure (a computer or a recording let the run down).

Recordings go through the run's store (:mod:`.store`): each start gets a
grant reaching only that recording's prefix, each end a fresh one, and after
the end the recording is downloaded into ``recordings/<recording_id>/``.
Recording steps fail the task by default as infrastructure failures when the
end did not happen, the log did not upload, the recorder restarted mid-recording
(the computer rebuilds and signs it from its journal, whole up to the restart), or
the download does not verify against the key pinned at ``deploy_env`` (:mod:`.attest`);
``fail_task_on_error: false`` makes them best-effort. Teardown ends open recordings with
fresh grants, registers from the store any it could not end (the computer forgot it, or
cannot be reached), then stops the computers it started and the local store.

Each body is its op's protocol model, made and sent by :class:`.Computer`
from the fields a step names (None: left out); tabs by URL are read as
``Tab``s; the answers of ``cookies/delete``, ``tabs/open`` and a recording's
start, which have no model, by key.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from agentenv.browsergym_episode import driver_python
from agentenv.harness import attest, exports
from agentenv.harness import steps as s
from agentenv.harness.agent_process import PASS_ENV, agent_addresses, run_process, withheld
from agentenv.harness.backends import start, stop_all
from agentenv.harness.browsergym_step import episode_env, episode_result, episode_status
from agentenv.harness.computer import Computer, ComputerError, agent_tokens, deploy
from agentenv.harness.harness_errors import StepFailed
from agentenv.harness.human_steps import wait_for_human
from agentenv.harness.local_store import LocalStore
from agentenv.harness.preflight import credential_values
from agentenv.harness.profile_steps import load_profile, save_profile
from agentenv.harness.run_store import Recorded, RunStore, StoreOptions, records, registered
from agentenv.harness.store import Store, StoreError, grant_seconds
from agentenv.harness.url_compare import tab_showing
from agentenv.protocol import browser as wire
from agentenv.protocol.answers import CookiesDeleted, RecordingStarted, TabOpened
from agentenv.protocol.card import BROWSER_V1, MissingOp
from agentenv.protocol.credentials import CredentialInfo, CredentialsSet
from agentenv.protocol.recording import BrowserRecordingManifest, End, Start

__all__ = ["EXIT_BAD_INPUT", "EXIT_INFRA", "EXIT_OK", "EXIT_TASK_FAILED", "Run"]

EXIT_OK, EXIT_TASK_FAILED, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3
#: The page a browser, or a scope, starts with.
BLANK = "about:blank"


@dataclass
class Run:
    task: s.Task
    out: Path
    #: Where the run says what it does (None: sys.stdout as it is when printing).
    stream: TextIO | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    computers: dict[str, Computer] = field(default_factory=dict)
    started_here: list[Computer] = field(default_factory=list)
    recordings: dict[str, Recorded] = field(default_factory=dict)
    cdp_urls: dict[str, str] = field(default_factory=dict, repr=False)
    agent_tokens: dict[str, str] = field(default_factory=dict, repr=False)
    #: env -> the relay a loopback door opens to for its agents' runs.
    doors: dict[str, str] = field(default_factory=dict, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None
    #: The last BrowserGym episode's reward (``run_browsergym``).
    reward: float | None = None
    #: ``--store``, ``--store-*`` and ``--network`` (see :mod:`.store`).
    store_options: StoreOptions = field(default_factory=StoreOptions)
    #: A batch's store, shared by its tasks (None: the run opens its own at
    #: first use and closes it at teardown).
    stores: RunStore | None = None
    _own_store: bool = False
    #: Set from another thread (Ctrl-C in a batch): the run stops at the next
    #: step, or kills the agent it waits for, then tears down as usual.
    cancelled: threading.Event = field(default_factory=threading.Event)
    #: What runs now, for a batch's table.
    current: str = "starting"
    #: A batch's pool (``--reuse``, ``--scopes-per-computer``): lends a
    #: computer for an image and the env's agents, already reset or with a
    #: scope opened for each agent, instead of starting one; the batch stops
    #: it (or closes the scopes), not this run.
    lend: Callable[[str | None, list[str]], Computer] | None = None
    #: Where computers start (:mod:`.backends`): ``docker``, ``swarm`` or
    #: ``kubernetes`` (in ``namespace`` through ``kube_context``).
    backend: str = "docker"
    namespace: str | None = None
    kube_context: str | None = None
    #: Called with each computer it started, just before it stops (a batch's last counts).
    before_stop: Callable[[Computer], None] | None = None
    #: (env, scope) pairs a tab step has acted in: the first
    #: ``browser_open_tab`` in each may use the blank tab it started with.
    _tabbed: set[tuple[str | None, str | None]] = field(default_factory=set)

    def _stores(self) -> RunStore:
        if self.stores is None:
            self.stores = RunStore.of(self)
            self._own_store = True
        return self.stores

    @property
    def store(self) -> Store:
        """The run's store, opened at the first recording (or, for the local
        store, at the first computer of a task that records: it joins the store's network)."""
        found = self._stores().get()
        self.metadata["store"] = found.where
        return found

    def say(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)

    # -- the run -----------------------------------------------------------------

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        self.metadata = {"run_id": self.run_id, "steps": {}}
        outcome = EXIT_OK
        total = len(self.task.steps)
        failures: list[str] = []
        try:
            for number, step in enumerate(self.task.steps, start=1):
                key = step.id or f"step-{number}"
                label = f"[{number:>2}/{total}] {step.type}" + (f" ({step.id})" if step.id else "")
                if self.cancelled.is_set():
                    failures.append(f"{key}: cancelled before it ran")
                    outcome = EXIT_INFRA
                    break
                self.current = f"{number}/{total} {step.type}"
                self.say(f"{label} ...")
                began = time.monotonic()
                try:
                    result = self._do(step)
                except StepFailed as exc:
                    took = time.monotonic() - began
                    kind = "infrastructure failure" if exc.infrastructure else "failed"
                    self.say(f"{label} {kind} after {took:.2f}s: {exc}")
                    self.metadata["steps"][key] = {
                        "type": step.type,
                        "ok": False,
                        "error": str(exc),
                        "infrastructure": exc.infrastructure,
                    }
                    failures.append(f"{key}: {exc}")
                    outcome = EXIT_INFRA if exc.infrastructure else EXIT_TASK_FAILED
                    break
                took = time.monotonic() - began
                self.metadata["steps"][key] = {
                    "type": step.type,
                    "ok": True,
                    "seconds": round(took, 3),
                    **(result or {}),
                }
                self.say(f"{label} ok in {took:.2f}s")
        finally:
            self.current = "teardown"
            if not self._teardown(failures) and outcome == EXIT_OK:
                outcome = EXIT_INFRA  # a recording the task needed did not arrive whole
            (self.out / "metadata.json").write_text(json.dumps(self.metadata, indent=2))
        status = {
            EXIT_OK: "done",
            EXIT_TASK_FAILED: "task failed",
            EXIT_INFRA: "infrastructure failure",
        }
        self.say(
            f"summary: {status[outcome]}; {len(self.metadata['steps'])} of {total} steps run; "
            f"artifacts in {self.out}"
        )
        for failure in failures:
            self.say(f"  {failure}")
        return outcome

    def _computer(self, env_id: str | None) -> Computer:
        if env_id is None or env_id not in self.computers:
            raise StepFailed(
                f"env {env_id!r} is not deployed: add a deploy_env step before this one"
            )
        return self.computers[env_id]

    def _handlers(self) -> dict[type[Any], Callable[[Any], dict[str, Any] | None]]:
        """Each step type's handler: one row a type (a unit test holds the
        table to the task file's union)."""
        return {
            s.DeployEnv: self._deploy_env,
            s.BrowserSetCookies: self._browser_set_cookies,
            s.BrowserDeleteCookies: self._browser_delete_cookies,
            s.BrowserSetLocalStorage: self._browser_set_local_storage,
            s.BrowserClearLocalStorage: self._browser_clear_local_storage,
            s.BrowserSetCredentials: self._browser_set_credentials,
            s.WaitForHuman: lambda st: wait_for_human(
                self._computer(st.env_id), self._scope(st), st, self.say, self.out
            ),
            s.BrowserSaveProfile: lambda st: save_profile(self._op, self.store, st, os.environ),
            s.BrowserLoadProfile: lambda st: load_profile(self._op, self.store, st, os.environ),
            s.BrowserOpenTab: self._browser_open_tab,
            s.BrowserCloseTab: self._browser_close_tab,
            s.BrowserActivateTab: self._browser_activate_tab,
            s.BrowserConnectCdp: self._browser_connect_cdp,
            s.StartBrowserRecording: self._start_browser_recording,
            s.EndBrowserRecording: self._end_browser_recording,
            s.RunAgent: self._run_agent,
            s.RunBrowsergym: self._run_browsergym,
            s.SnapshotEnv: self._snapshot_env,
            s.ExportMind2web: self._export_mind2web,
            s.ExportWebarenaVerified: self._export_webarena_verified,
        }

    def _do(self, step: Any) -> dict[str, Any] | None:
        handler = self._handlers()[type(step)]
        try:
            return handler(step)
        except MissingOp as exc:
            raise StepFailed(str(exc), infrastructure=True) from None
        except ComputerError as exc:
            infrastructure = exc.status is None or exc.status >= 500
            raise StepFailed(str(exc), infrastructure=infrastructure) from None
        except StoreError as exc:
            raise StepFailed(str(exc), infrastructure=True) from None

    # -- steps ---------------------------------------------------------------------

    def _deploy_env(self, step: s.DeployEnv) -> dict[str, Any]:
        env = self.task.envs[step.env_id]
        found = env.at(step.version)
        version, spec = found if found else (None, None)
        image = step.image or (spec.image if spec else None)
        if step.url is not None:
            computer = deploy(None, step.url, step.token, step.cdp_url)
        elif self.lend is not None:
            computer = self.lend(image, self.task.agents(step.env_id))
        else:
            computer = start(
                self.backend,
                image,
                agent_tokens(self.task.agents(step.env_id)),
                artifacts=self.out.resolve() if self.store_options.spec == "file" else None,
                namespace=self.namespace,
                kube_context=self.kube_context,
                networks=self._stores().networks(records(self.task)),
            )
            self.started_here.append(computer)
        self.computers[step.env_id] = computer
        self._check_store(computer)
        attest.pin(self.metadata, step.env_id, key := computer.public_key())
        where = {"api": computer.api, "cdp": computer.cdp, "key": key}
        return {"env_id": step.env_id, "version": version, **where}

    def _check_store(self, computer: Computer) -> None:
        """Before any step needs it: that a computer of a task that records
        reaches the local store, asked from the computer's side."""
        if not records(self.task) or self.stores is None or self.stores.opened is None:
            return
        opened = self.stores.opened
        if isinstance(opened, LocalStore) and computer.container is not None:
            problem = opened.unreachable_from(computer.container)
            if problem is not None:
                raise StepFailed(problem, infrastructure=True)

    def _scope(self, step: Any) -> str | None:
        """The scope a browser step acts in: its agent's (each agent the
        harness starts a computer for is a scope of its own, named as the
        agent); None, the home scope, for a computer of one agent."""
        if step.agent is not None:
            return str(step.agent)
        agents = self.task.agents(step.env_id)
        if len(agents) > 1:  # preflight refuses it first
            raise StepFailed(
                f"this computer has several agents ({', '.join(agents)}), each in a "
                "browser of its own: say which one the step is for with agent:"
            )
        return None

    def _op(self, step: Any, op: str, model: type[BaseModel], **fields: Any) -> Any:
        """The browser/v1 op ``op`` in the scope of the step's agent, its body ``model``."""
        scope = self._scope(step)
        return self._computer(step.env_id).op(op, model, scope=scope, **fields)

    def _browser_set_cookies(self, step: s.BrowserSetCookies) -> None:
        self._op(step, "cookies/set", wire.CookiesSet, cookies=step.cookies)

    def _browser_delete_cookies(self, step: s.BrowserDeleteCookies) -> dict[str, Any]:
        which = {"name": step.name, "domain": step.domain, "path": step.path}
        deleted: CookiesDeleted = self._op(step, "cookies/delete", wire.CookiesDelete, **which)
        return {"deleted": deleted.deleted}

    def _browser_set_local_storage(self, step: s.BrowserSetLocalStorage) -> None:
        stored = {"origin": step.origin, "items": step.items}
        self._op(step, "local_storage/set", wire.LocalStorageSet, **stored)

    def _browser_clear_local_storage(self, step: s.BrowserClearLocalStorage) -> None:
        self._op(step, "local_storage/clear", wire.LocalStorageClear, origin=step.origin)

    def _browser_set_credentials(self, step: s.BrowserSetCredentials) -> dict[str, Any]:
        """``credentials/set`` for each credential, its values read from the
        environment variables the task names (never printed, never in the
        run's metadata: what the step did is the names and origins)."""
        done = []
        for credential in step.credentials:
            values, problems = credential_values(credential, os.environ)
            if problems:
                raise StepFailed(f"credential {credential.name!r}: {'; '.join(problems)}")
            asked = {"name": credential.name, "origin": credential.origin, **values}
            made: CredentialInfo = self._op(step, "credentials/set", CredentialsSet, **asked)
            done.append({"name": made.name, "origin": made.origin, "fields": made.fields})
        return {"credentials": done}

    def _browser_open_tab(self, step: s.BrowserOpenTab) -> dict[str, Any]:
        """``tabs/open``; but a browser's first tab step, in a scope whose one
        tab is the blank one it started with, shows ``url`` in that tab
        (``navigate``): the agent's first page is its task's, not a blank
        one beside it, and a warm scope's tab, its renderer started ahead,
        is the one the task uses (no second renderer a task)."""
        where = (step.env_id, self._scope(step))
        first = where not in self._tabbed
        self._tabbed.add(where)
        computer = self._computer(step.env_id)
        if first and not step.background and computer.card().serves(BROWSER_V1, "navigate"):
            tabs = computer.tabs(where[1])
            if len(tabs) == 1 and tabs[0].url == BLANK:
                asked = {"url": step.url, "tab": tabs[0].id}
                self._op(step, "navigate", wire.Navigate, **asked)
                return {"tab": tabs[0].id}
        asked = {"url": step.url, "background": step.background}
        opened: TabOpened = self._op(step, "tabs/open", wire.TabsOpen, **asked)
        return {"tab": opened.id}

    def _tab_at(self, step: Any, url: str) -> str:
        scope = self._scope(step)
        self._tabbed.add((step.env_id, scope))
        try:
            return tab_showing(self._computer(step.env_id).tabs(scope), url)
        except LookupError as exc:
            raise StepFailed(str(exc)) from None

    def _browser_close_tab(self, step: s.BrowserCloseTab) -> dict[str, Any]:
        tab = self._tab_at(step, step.url)
        self._op(step, "tabs/close", wire.TabRef, id=tab)
        return {"tab": tab}

    def _browser_activate_tab(self, step: s.BrowserActivateTab) -> dict[str, Any]:
        tab = self._tab_at(step, step.url)
        self._op(step, "tabs/activate", wire.TabRef, id=tab)
        return {"tab": tab}

    def _browser_connect_cdp(self, step: s.BrowserConnectCdp) -> dict[str, Any]:
        computer = self._computer(step.env_id)
        token = computer.agents.get(step.agent)
        if token is None:
            if computer.agents:
                raise StepFailed(
                    f"the computer knows no agent {step.agent!r}: its agents are "
                    f"{', '.join(sorted(computer.agents))}",
                    infrastructure=True,
                )
            url = f"{computer.cdp}?user={step.agent}"  # an attached computer without users
        else:
            url = f"{computer.cdp}?token={token}"
            self.agent_tokens[step.env_id] = token
        if step.debugger_address:
            self.doors[step.env_id] = computer.cdp
        else:
            self.doors.pop(step.env_id, None)
        self.cdp_urls[step.env_id] = url
        return {"agent": step.agent, "cdp": computer.cdp}  # never the token

    def _start_browser_recording(self, step: s.StartBrowserRecording) -> dict[str, Any] | None:
        computer = self._computer(step.env_id)
        scope = self._scope(step)
        key = f"{self.run_id}/{step.name}"
        try:
            grant = self.store.grant(
                key,
                started_here=computer.container is not None,
                seconds=grant_seconds(step.max_duration_s),
            )
            started: RecordingStarted = computer.recording(
                "start",
                Start,
                request_id=f"{self.run_id}-{step.name}",
                name=step.name,
                upload=grant,
                frames=step.frames,
                scope=scope or None,
                max_frames=step.max_frames or None,
                max_duration_s=step.max_duration_s or None,
                video=step.video,
                har=step.har,
                downloads=step.downloads or None,
            )
        except (ComputerError, MissingOp, StoreError) as exc:
            if step.fail_task_on_error:
                raise StepFailed(
                    f"the recording did not start: {exc}", infrastructure=True
                ) from None
            return {"recording": None, "error": str(exc)}
        recording_id = started.recording_id
        folder = (self.out / "recordings" / recording_id).resolve()
        self.recordings[step.name] = Recorded(
            step.name, step.env_id, recording_id, folder, key, step.fail_task_on_error
        )
        attest.started(self.metadata, recording_id, step.name, step.env_id)
        return {"recording_id": recording_id, "store": f"{self.store.where}/{key}"}

    def _end_recording(
        self, recorded: Recorded, reason: str, unreachable_ok: bool = False
    ) -> tuple[BrowserRecordingManifest, list[str]]:
        """End on the computer (a fresh grant), then download from the store.

        A computer that no longer knows the recording (404), or at teardown
        one that cannot be reached, has what the store holds registered."""
        computer = self.computers[recorded.env_id]
        manifest: BrowserRecordingManifest | None = None
        try:
            grant = self.store.grant(recorded.key, started_here=computer.container is not None)
            manifest = computer.recording(
                "end", End, recording_id=recorded.recording_id, upload=grant, reason=reason
            )
        except ComputerError as exc:
            if not (exc.status == 404 or (unreachable_ok and exc.status is None)):
                raise
        names, skipped = self.store.fetch(recorded.key, recorded.recording_id, recorded.folder)
        problems = (
            [f"the store holds {len(skipped)} object(s) no recording folder can"] if skipped else []
        )
        if manifest is None:
            manifest = registered(recorded.folder, recorded.recording_id, names)
            if manifest.reason is not None and manifest.reason != reason:
                # Its recorder ended it on the way down (a restart): whole, but early.
                problems.append(f"it ended before its end step ({manifest.reason})")
            elif manifest.reason is None:
                problems.append("the computer did not end it: registered what the store holds")
        elif manifest.rebuilt_why:  # whole up to its recorder's restart, and signed
            problems.append(manifest.rebuilt_why)
        problems += attest.checked(self.metadata, recorded.recording_id, recorded.folder)
        recorded.manifest = manifest
        return manifest, problems

    def _end_browser_recording(self, step: s.EndBrowserRecording) -> dict[str, Any]:
        recorded = self.recordings.get(step.name)
        if recorded is None:
            raise StepFailed(f"no recording {step.name!r} was started in this run")
        problems: list[str] = []
        manifest: BrowserRecordingManifest | None = None
        try:
            manifest, problems = self._end_recording(recorded, "completed")
        except (ComputerError, MissingOp, StoreError) as exc:
            problems.append(f"the recording did not end: {exc}")
        if manifest is not None:
            if manifest.log is None:
                problems.append("its log did not upload")
            if manifest.missing_frames:
                problems.append(f"{manifest.missing_frames} frame(s) missing")
            if manifest.log_missing:
                problems.append(f"{len(manifest.log_missing)} log entries missing")
            if manifest.limits_hit:
                self.say(f"  recording {step.name}: limits hit: {', '.join(manifest.limits_hit)}")
        if problems and step.fail_task_on_error:
            raise StepFailed("; ".join(problems), infrastructure=True)
        artifacts = {}
        if manifest is not None:
            artifacts = {
                "manifest": str(recorded.folder / "manifest.json"),
                "log": str(recorded.folder / "log.jsonl"),
                "frames": [str(recorded.folder / f.file) for f in manifest.frames if not f.error],
            }
        return {
            "recording_id": recorded.recording_id,
            "problems": problems,
            "limits_hit": manifest.limits_hit if manifest is not None else [],
            "artifacts": artifacts,
        }

    def _run_agent(self, step: s.RunAgent) -> dict[str, Any]:
        answer_file = self.out / f"agent-answer-{uuid.uuid4().hex[:6]}.txt"
        env = dict(os.environ, **step.env, AGENTENV_ANSWER_FILE=str(answer_file))
        with self._agent_env(step, env):
            return self._run(step, env, answer_file)

    def _run_browsergym(self, step: s.RunBrowsergym) -> dict[str, Any]:
        """One BrowserGym episode: the driver (in a Python with
        ``agentenv[browsergym]``) plays it, the agent its child; the reward
        is BrowserGym's, read from the driver's result file."""
        result_file = self.out / f"browsergym-{uuid.uuid4().hex[:6]}.json"
        env = episode_env(step, result_file)
        agent = step.command if isinstance(step.command, list) else ["/bin/sh", "-c", step.command]
        python = driver_python(step.python)
        command = [python, "-m", "agentenv.browsergym_episode", "--", *agent]
        log = self.out / f"browsergym-{step.id or uuid.uuid4().hex[:6]}.log"
        with self._agent_env(step, env):
            status = run_process(command, env, log, step.timeout_s, self.cancelled)
        found = episode_result(result_file, python, log, status)
        self.reward = float(found["reward"] or 0.0)
        episode_status(found, status, log)
        return {"exit_status": 0, "output": str(log), **found}

    @contextlib.contextmanager
    def _agent_env(self, step: s.RunAgent | s.RunBrowsergym, env: dict[str, str]) -> Iterator[None]:
        """``env`` given the computer's addresses and the agent's token (a
        loopback door's address too, open while the agent runs), less the withheld."""
        withheld(env, self.task, [*step.pass_env, *step.env], os.environ.get(PASS_ENV, ""))
        env_id = step.env_id
        computer = self._computer(env_id) if env_id else next(iter(self.computers.values()), None)
        if computer is None:
            yield
            return
        env_id = env_id or next(iter(self.computers))
        cdp, token = self.cdp_urls.get(env_id), self.agent_tokens.get(env_id)
        with agent_addresses(env, computer, cdp, token, self.doors.get(env_id)):
            yield

    def _run(self, step: s.RunAgent, env: dict[str, str], answer_file: Path) -> dict[str, Any]:
        command = (
            step.command if isinstance(step.command, list) else ["/bin/sh", "-c", step.command]
        )
        log = self.out / f"agent-{step.id or uuid.uuid4().hex[:6]}.log"
        status = run_process(command, env, log, step.timeout_s, self.cancelled)
        if answer_file.exists():
            self.answer = answer_file.read_text().strip()
        if status != 0:
            raise StepFailed(f"the agent exited with status {status} (its output: {log})")
        return {"exit_status": 0, "output": str(log), "answer": self.answer}

    def _snapshot_env(self, step: s.SnapshotEnv) -> dict[str, Any]:
        archive = self._computer(step.env_id).data_get(self._scope(step))
        path = self.out / f"snapshot-{step.env_id}.tar.gz"
        path.write_bytes(archive)
        return {"snapshot": str(path)}

    def _ended(self, name: str) -> tuple[Recorded, BrowserRecordingManifest]:
        """A recording this run ended, and its manifest, for an export."""
        recorded = self.recordings.get(name)
        if recorded is None or recorded.manifest is None:
            raise StepFailed(f"recording {name!r} has not ended: end it before the export")
        return recorded, recorded.manifest

    def _export_mind2web(self, step: s.ExportMind2web) -> dict[str, Any]:
        recorded, manifest = self._ended(step.recording)
        target = exports.mind2web_task(manifest, recorded.folder, self.out, step, self.answer)
        attest.write_attestation(target, self.metadata, recorded.recording_id)
        return {"export": str(target)}

    def _export_webarena_verified(self, step: s.ExportWebarenaVerified) -> dict[str, Any]:
        recorded, manifest = self._ended(step.recording)
        target = exports.webarena_run(manifest, recorded.folder, self.out, step, self.answer)
        attest.write_attestation(target, self.metadata, recorded.recording_id)
        return {"export": str(target)}

    # -- teardown --------------------------------------------------------------------

    def _teardown(self, failures: list[str]) -> bool:
        """End what is open, stop what this run started; False when a recording
        the task needed could not be ended or registered whole."""
        whole = True
        for recorded in self.recordings.values():
            if recorded.manifest is not None or recorded.env_id not in self.computers:
                continue
            problems: list[str] = []
            try:
                manifest, problems = self._end_recording(recorded, "stopped", unreachable_ok=True)
                what = "registered from the store" if manifest.reason is None else "ended"
                self.say(f"teardown: {what} recording {recorded.name}")
                if manifest.log is None:
                    problems.append("its log is not in the store")
                if manifest.missing_frames:
                    problems.append(f"{manifest.missing_frames} frame(s) missing")
            except (ComputerError, MissingOp, StoreError) as exc:
                problems.append(str(exc))
            self.metadata.setdefault("teardown", {})[recorded.name] = {
                "recording_id": recorded.recording_id,
                "problems": problems,
            }
            if problems:
                failures.append(f"teardown: recording {recorded.name}: {'; '.join(problems)}")
                whole = whole and not recorded.must_succeed
        failures += stop_all(self.started_here, self.before_stop)
        if self._own_store and self.stores is not None:
            try:
                self.stores.close()
            except StoreError as exc:
                failures.append(f"teardown: {exc}")
        return whole
