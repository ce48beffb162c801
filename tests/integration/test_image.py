"""The image as users deploy it: users and a control token configured, hardened
(tests/support/container.py). It becomes ready and is driven through the
relay with an agent's token; each program runs as its own unprivileged user;
Docker's HEALTHCHECK says healthy; and each program killed with -9 inside comes
back, with clients told, /readyz honest meanwhile, and the action log's
numbering and hash chain carried on: a relay killed while an agent sends
commands leaves a chain that verifies up to the crash, with a named break."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import requests
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from agentenv.protocol.chain import GENESIS, log_check
from tests.support.container import Computer, computer
from tests.support.timing import deadline, wait_for

SUPERVISORCTL = ["supervisorctl", "-c", "/opt/agentenv/image/supervisord.conf"]
LOG_FILE = "browser-browser.jsonl"
PROGRAMS = ("chromium", "relay", "app", "recorder")
#: Root processes by design: the init, supervisord (it starts each program as
#: its user, with SETUID/SETGID only), the tee chromium.sh keeps so Chromium
#: cannot reach its own log file, and the ps this test runs.
ROOT_ALLOWED = {"tini", "supervisord", "tee", "ps"}


@pytest.fixture(scope="module")
def pc(image: str) -> Iterator[Computer]:
    with computer(image) as running:
        yield running


def _drive(pc: Computer, user: str = "alice") -> None:
    """Playwright through the relay with ``user``'s bearer header."""
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(
            pc.relay, headers=pc.headers(user), timeout=deadline(30) * 1000
        )
        page = browser.contexts[0].new_page()
        page.set_content("<title>Inside</title><input id=q><p id=out></p>")
        page.fill("#q", "container words")
        assert page.evaluate("document.getElementById('q').value") == "container words"
        assert page.title() == "Inside"
        assert page.screenshot()[:4] == b"\x89PNG"
        page.close()
        browser.close()


def _pid(pc: Computer, program: str) -> int:
    pid = pc.exec(*SUPERVISORCTL, "pid", program).strip()
    assert pid.isdigit() and int(pid) > 0, (program, pid)
    return int(pid)


def _processes(pc: Computer) -> list[tuple[str, int, int, str]]:
    """(user, pid, ppid, command name) of every process in the container."""
    rows = []
    for row in pc.exec("ps", "-eo", "user:32=,pid=,ppid=,comm=").splitlines():
        user, pid, ppid, comm = row.split(None, 3)
        rows.append((user, int(pid), int(ppid), comm.strip()))
    return rows


def _raw_log(pc: Computer) -> list[bytes]:
    """Every line of the action log file, as written."""
    found = [v for k, v in pc.files().items() if k.endswith("/" + LOG_FILE)]
    if len(found) != 1:
        raise FileNotFoundError(f"no {LOG_FILE} in the container's log folder")
    if found[0] and not found[0].endswith(b"\n"):
        raise ValueError("the log's last line is torn")
    return found[0].splitlines()


def _log(pc: Computer) -> list[dict[str, Any]]:
    """Every line of the action log file (each must be one JSON object)."""
    return [json.loads(line) for line in _raw_log(pc)]  # each line parses


def _settled_log(pc: Computer, past: int) -> list[dict[str, Any]]:
    """The log once every number up to its highest has its line, and it
    reaches ``past``."""

    def probe() -> list[dict[str, Any]] | None:
        lines = _log(pc)
        seqs = sorted(x["seq"] for x in lines)
        whole = seqs == list(range(1, len(seqs) + 1))
        return lines if seqs and seqs[-1] >= past and whole else None

    lines: list[dict[str, Any]] = wait_for(probe, f"the log to settle past entry {past}", 30)
    return lines


def _check_numbering(lines: list[dict[str, Any]]) -> int:
    """Numbers unique and contiguous from 1 (a ``lost`` line stands for a
    number taken before a crash); the highest."""
    seqs = [x["seq"] for x in lines]
    assert len(seqs) == len(set(seqs)), "a number is on two lines"
    assert sorted(seqs) == list(range(1, len(seqs) + 1)), "numbers are missing"
    for line in lines:
        kinds = set(line) - {"seq", "at", "prev"}
        assert len(kinds) == 1, line
        if "lost" in line:
            assert line["lost"] == {"entry": line["seq"]}, line
    return int(max(seqs))


def _navigate(pc: Computer, url: str) -> int:
    """alice navigates (her own op, via api); the entry's number."""
    pc.op("navigate", {"url": url}, user="alice")

    def entry() -> int | None:
        for line in _log(pc):
            action = line.get("action", {})
            if action.get("op") == "navigate" and url in json.dumps(action):
                assert (action["via"], action["who"], action["ok"]) == ("api", "alice", True)
                return int(line["seq"])
        return None

    return wait_for(entry, f"alice's navigation to {url} in the log", timeout_s=20)


def test_ready_and_driven_through_the_relay(pc: Computer) -> None:
    ready = requests.get(pc.app + "/readyz", timeout=deadline(10))
    assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    version = requests.get(pc.relay + "/json/version", timeout=deadline(10)).json()
    assert version["Browser"].startswith(("Chrome/", "HeadlessChrome/"))
    assert version["webSocketDebuggerUrl"].startswith(f"ws://{pc.relay_address}/devtools/")
    card = requests.get(pc.app + "/card", timeout=deadline(10)).json()
    assert card["name"] == "browser" and "browser/v1" in card["extensions"]
    # Secured: no token, no tabs; alice's token opens the door.
    assert requests.get(pc.relay + "/json/list", timeout=deadline(10)).status_code == 401
    alice = pc.headers("alice")
    listed = requests.get(pc.relay + "/json/list", headers=alice, timeout=deadline(10))
    assert listed.status_code == 200
    with sync_playwright() as pw, pytest.raises(PlaywrightError):
        pw.chromium.connect_over_cdp(pc.relay, timeout=deadline(30) * 1000)
    _drive(pc)
    lines = _settled_log(pc, 1)
    acted = [x["action"] for x in lines if "action" in x and x["action"]["via"] == "cdp"]
    assert acted and {a["who"] for a in acted} == {"alice"}, acted[:5]
    assert any(a["method"] == "Input.insertText" for a in acted)


def test_the_protocol_table_classifies_every_command_of_the_shipped_chromium(
    pc: Computer,
) -> None:
    """The shipped Chromium's /json/protocol holds exactly the pinned commands,
    each classified: a Chromium update that adds one fails here until the
    table is looked at (scripts/protocol-commands.sh writes the new list)."""
    from agentenv.relay.commands import classify
    from agentenv.relay.pinned import CHROMIUM, COMMANDS

    answer = requests.get(pc.relay + "/json/protocol", headers=pc.headers("alice"), timeout=30)
    assert answer.status_code == 200, answer.text[:500]
    shipped = {
        f"{d['domain']}.{c['name']}"
        for d in answer.json()["domains"]
        for c in d.get("commands", [])
    }
    assert len(shipped) > 500, len(shipped)
    card = requests.get(pc.app + "/card", headers=pc.headers(), timeout=30).json()
    chromium = card["versions"]["chromium"]
    assert shipped - COMMANDS == set(), (
        f"Chromium {chromium} has commands the table ({CHROMIUM}) never classified"
    )
    assert COMMANDS - shipped == set(), f"the table lists commands Chromium {chromium} lacks"
    assert all(classify(m).rule != "unclassified" for m in shipped)
    assert card["versions"]["protocol_table"] == CHROMIUM


def test_a_plain_docker_run_gives_back_a_blob_download(image: str) -> None:
    """``docker run`` with no mounts of the compose file's: Chromium stages a
    Blob download in ``/tmp`` and renames it into the downloads folder, on the
    same file system, so the file keeps the group it was made with. Chromium's
    primary group is downloads (launch/chromium.sh), so the app reads it:
    ``downloads/get`` gives back its bytes."""
    content = f"plain run {uuid.uuid4().hex}"
    with computer(image, hardened=False) as plain:
        with sync_playwright() as pw:
            browser = pw.chromium.connect_over_cdp(
                plain.relay, headers=plain.headers("alice"), timeout=deadline(30) * 1000
            )
            page = browser.contexts[0].new_page()
            with page.expect_download(timeout=deadline(30) * 1000) as fetched:
                page.evaluate(
                    "text => { const a = document.createElement('a');"
                    " a.href = URL.createObjectURL(new Blob([text])); a.download = 'plain.txt';"
                    " document.body.append(a); a.click(); }",
                    content,
                )
            assert fetched.value.failure() is None
            page.close()
            browser.close()
        listed = plain.op("downloads/list", {}, user="alice")
        done = [d for d in listed if d["bytes"] == len(content) and not d["partial"]]
        assert len(done) == 1, listed
        got = plain.op("downloads/get", {"name": done[0]["name"]}, user="alice")
        assert got == content.encode()
        # The folder is not a file system of its own here: the rename case.
        mounts = plain.exec("cat", "/proc/mounts")
        assert " /var/lib/agentenv/downloads " not in mounts, mounts


def test_programs_run_as_their_users(pc: Computer) -> None:
    rows = _processes(pc)
    user_of = {pid: user for user, pid, _, _ in rows}
    for program in ("relay", "app", "recorder"):
        assert user_of[_pid(pc, program)] == "agentenv", (program, rows)
    chromium = _pid(pc, "chromium")
    assert user_of[chromium] == "browser", rows
    browsers = [(user, comm) for user, _, _, comm in rows if comm.startswith("chrom")]
    assert len(browsers) > 1, "Chromium has no child processes?"
    assert {user for user, _ in browsers} == {"browser"}, rows
    rooted = {comm for user, _, _, comm in rows if user == "root"}
    assert rooted <= ROOT_ALLOWED, rows
    assert {"tini", "supervisord"} <= rooted
    assert pc.exec("readlink", "/proc/1/exe").strip().endswith("tini")
    status = pc.exec(*SUPERVISORCTL, "status")
    for program in PROGRAMS:
        assert any(line.split()[:2] == [program, "RUNNING"] for line in status.splitlines()), status


def test_docker_healthcheck_says_healthy(pc: Computer) -> None:
    wrapped = pc.container.get_wrapped_container()

    def health() -> str | None:
        wrapped.reload()
        status = wrapped.attrs["State"].get("Health", {}).get("Status")
        return status if status == "healthy" else None

    wait_for(health, "Docker's HEALTHCHECK to say healthy", timeout_s=60, interval_s=0.5)


def _status(pc: Computer) -> int | None:
    """The status /readyz answers, or None while nothing answers."""
    try:
        return requests.get(pc.app + "/readyz", timeout=deadline(5)).status_code
    except requests.ConnectionError:
        return None  # the app itself is down


async def _kill_under_client(pc: Computer, pid: int) -> aiohttp.WSMessage:
    """Kill ``pid`` while a raw CDP client (alice) is connected through the
    relay; what the client gets next."""
    version = requests.get(pc.relay + "/json/version", timeout=deadline(10)).json()
    url = version["webSocketDebuggerUrl"]
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers=pc.headers("alice"), max_msg_size=0) as ws,
    ):
        await ws.send_json({"id": 1, "method": "Target.getTargets"})
        while True:  # the connection works end to end before the kill
            message = await ws.receive_json(timeout=deadline(30))
            if message.get("id") == 1:
                assert "result" in message, message
                break
        await asyncio.to_thread(pc.exec, "kill", "-9", str(pid))
        while True:
            got = await ws.receive(timeout=deadline(30))
            if got.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                continue  # events still on their way
            return got


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_program_killed_inside_comes_back(pc: Computer, program: str) -> None:
    before = _check_numbering(_settled_log(pc, 1))
    marker = f"about:blank#before-{program}"
    assert _navigate(pc, marker) > before
    before = _check_numbering(_settled_log(pc, before + 1))
    pid = _pid(pc, program)
    rows = _processes(pc)
    killed, todo = set(), [pid]
    while todo:  # the program and every process it started
        parent = todo.pop()
        killed.add(parent)
        todo += [p for _, p, ppid, _ in rows if ppid == parent]

    if program in ("chromium", "relay"):
        got = asyncio.run(_kill_under_client(pc, pid))
        if program == "chromium":
            # The relay stays: it tells the client why (a close frame, 1011).
            assert got.type == aiohttp.WSMsgType.CLOSE, got
            assert got.data == 1011, got
        else:
            # The relay itself is gone: the connection closes under the client.
            assert got.type in (
                aiohttp.WSMsgType.CLOSE,
                aiohttp.WSMsgType.CLOSED,
                aiohttp.WSMsgType.ERROR,
            ), got
    else:
        pc.exec("kill", "-9", str(pid))

    # /readyz says not ready (the app answers 503; while the app itself is
    # down, nothing answers), then ready again.
    down = (503, None) if program == "app" else (503,)
    wait_for(
        lambda: _status(pc) in down or None,
        f"/readyz to say not ready after {program} was killed",
        timeout_s=15,
        interval_s=0.02,
    )
    wait_for(
        lambda: _status(pc) == 200,
        f"/readyz to say ready again after {program} came back",
        timeout_s=90,
        interval_s=0.2,
    )
    assert _pid(pc, program) != pid
    wait_for(
        lambda: not killed & {p for _, p, _, _ in _processes(pc)},
        f"every process of the killed {program} to be gone",
        timeout_s=20,
        interval_s=0.2,
    )
    _drive(pc)  # new connections work

    after = _navigate(pc, f"about:blank#after-{program}")
    assert after > before, (before, after)
    lines = _settled_log(pc, after)
    _check_numbering(lines)
    if program == "chromium":
        exits = [
            x for x in lines if x["seq"] > before and x.get("tab", {}).get("by") == {"kind": "exit"}
        ]
        assert exits and all(x["tab"]["event"] == "closed" for x in exits), exits

    chain = log_check(_raw_log(pc), GENESIS)  # every line links, across each restart
    assert chain.problems == [], chain.problems

    def no_zombies() -> bool:
        return not any(s.startswith("Z") for s in pc.exec("ps", "-eo", "stat=").split())

    # Killed programs' children exit within moments; tini reaps them.
    wait_for(no_zombies, "no zombie processes in the container", timeout_s=20, interval_s=0.5)


async def _commands_while_the_relay_is_killed(pc: Computer, pid: int) -> int:
    """alice sends commands back to back (ten in flight) and, once 50 are
    answered, the relay is killed with -9 under her while she goes on; how
    many were answered before her connection dropped."""
    version = requests.get(pc.relay + "/json/version", timeout=deadline(10)).json()
    answered, sent = 0, 0
    kill: asyncio.Future[str] | None = None
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(
            version["webSocketDebuggerUrl"], headers=pc.headers("alice"), max_msg_size=0
        ) as ws,
    ):

        async def send() -> None:
            nonlocal sent
            sent += 1
            await ws.send_json({"id": sent, "method": "Target.getTargets"})

        for _ in range(10):
            await send()
        while True:
            got = await ws.receive(timeout=deadline(30))
            if got.type != aiohttp.WSMsgType.TEXT:
                break  # the relay is gone
            if "id" not in json.loads(got.data):
                continue
            answered += 1
            if answered == 50:
                kill = asyncio.ensure_future(asyncio.to_thread(pc.exec, "kill", "-9", str(pid)))
            try:
                await send()
            except (ConnectionError, RuntimeError):
                break
    assert kill is not None, f"the relay dropped alice after {answered} answers, before the kill"
    await kill
    return answered


def test_a_relay_killed_mid_run_leaves_a_chain_that_verifies_with_a_named_break(
    pc: Computer,
) -> None:
    before = _check_numbering(_settled_log(pc, 1))
    breaks = len(log_check(_raw_log(pc), GENESIS).breaks)
    pid = _pid(pc, "relay")
    answered = asyncio.run(_commands_while_the_relay_is_killed(pc, pid))
    assert answered >= 50, answered
    wait_for(lambda: _status(pc) == 200, "/readyz after the relay was killed", timeout_s=90)
    assert _pid(pc, "relay") != pid
    after = _navigate(pc, "about:blank#after-the-chain-kill")
    _check_numbering(_settled_log(pc, after))

    lines = _raw_log(pc)
    chain = log_check(lines, GENESIS)
    # The whole file verifies: up to the crash, across it, and after.
    assert chain.problems == [], chain.problems
    assert len(chain.breaks) == breaks + 1, chain.breaks
    named = chain.breaks[-1]
    assert "stopped without closing the log (a crash or a kill)" in named, named
    parsed = [json.loads(x) for x in lines]
    at = next(i for i, x in enumerate(parsed) if "break" in x and x["seq"] > before)
    # The killed writer's lines are all before the break: alice's commands
    # up to the crash, and none of hers after it.
    sent = [
        i
        for i, x in enumerate(parsed)
        if x.get("action", {}).get("method") == "Target.getTargets"
        and x["action"]["who"] == "alice"
        and x["seq"] > before
    ]
    assert len(sent) >= answered - 10 and max(sent) < at, (len(sent), answered, at)
    # Each number the break names lost has its lost line, after the break.
    lost = parsed[at]["break"]["lost"]
    assert {x["lost"]["entry"] for x in parsed[at + 1 :] if "lost" in x} >= set(lost), lost
