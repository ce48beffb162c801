"""The control token's ops and recordings, scope by scope (issue 21, points 6
and 7), against the built image with users and a control token.

- Each state op takes ``scope``: cookies, local storage and tabs set for Bob
  are in Bob's browser, and Alice's sees none of them.
- A user's token acts in its own scope: Bob's pixel ops, ``tabs/list`` and
  live view are Bob's, and naming Alice's scope is refused.
- A recording per scope, two at once while both agents act: each frames only
  its own scope's tabs (the colour each page paints says whose it is) and
  its log slice holds only its own scope's entries.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import sync_playwright

from agentenv.harness.local_store import LocalStore
from agentenv.protocol.chain import CHAIN_FILE, recording_problems
from tests.security.attacks import browser_url
from tests.support.colours import page_shown, serve_inside
from tests.support.container import Computer, computer
from tests.support.timing import deadline

SITE = "http://127.0.0.1:8100"
SECRET = "bobs-scoped-cookie-8812"


@pytest.fixture(scope="module")
def pc(image: str, run_network: Any) -> Iterator[Computer]:
    with computer(image, network=run_network) as running:
        serve_inside(running, 8100)
        yield running


def _reader(folder: Path) -> Callable[[str], bytes | None]:
    """A recording's files, read from where it was fetched."""
    return lambda name: (folder / name).read_bytes() if (folder / name).is_file() else None


def _urls(tabs: list[dict[str, Any]]) -> set[str]:
    return {t["url"] for t in tabs}


def test_state_ops_act_in_the_scope_named(pc: Computer) -> None:
    before = pc.log()[1]
    pc.op(
        "cookies/set",
        {"scope": "bob", "cookies": [{"name": "s", "value": SECRET, "url": SITE}]},
    )
    opened = pc.op("tabs/open", {"scope": "bob", "url": SITE + "/c/blue"})
    pc.op(
        "local_storage/set",
        {"scope": "bob", "origin": SITE, "items": {"k": "bobs-storage"}},
    )
    # Bob's browser has them; Alice's (the home scope) has none.
    assert SECRET in str(pc.op("cookies/get", {"scope": "bob"}))
    assert SECRET not in str(pc.op("cookies/get"))
    assert SECRET not in str(pc.op("cookies/get", {"scope": "alice"}))
    bobs = pc.op("tabs/list", {"scope": "bob"})
    assert opened["id"] in {t["id"] for t in bobs}, bobs
    assert opened["id"] not in {t["id"] for t in pc.op("tabs/list")}
    stored = pc.op("local_storage/get", {"scope": "bob", "origin": SITE})
    assert stored["items"] == {"k": "bobs-storage"}, stored
    assert pc.op("local_storage/get", {"origin": SITE})["items"] == {}
    # Bob's own client sees them as his browser's.
    with sync_playwright() as pw:
        bob = pw.chromium.connect_over_cdp(browser_url(pc, "bob"), timeout=deadline(30) * 1000)
        context = bob.contexts[0]
        assert SECRET in str(context.cookies())
        assert SITE + "/c/blue" in {p.url for p in context.pages}
        alice = pw.chromium.connect_over_cdp(browser_url(pc, "alice"), timeout=deadline(30) * 1000)
        assert SECRET not in str(alice.contexts[0].cookies())
        assert SITE + "/c/blue" not in {p.url for p in alice.contexts[0].pages}
        bob.close()
        alice.close()
    # A user's token acts in its own scope: Bob's ops are Bob's.
    assert opened["id"] in {t["id"] for t in pc.op("tabs/list", user="bob")}
    assert opened["id"] not in {t["id"] for t in pc.op("tabs/list", user="alice")}
    shot = pc.op("screenshot", {"tab": opened["id"]}, user="bob")
    assert page_shown(shot) == "blue"
    pc.op("screenshot", {"tab": opened["id"]}, user="alice", status=404)

    # The live view of Bob's token is Bob's active tab; Alice's is not.
    def live(user: str | None, query: str = "") -> bytes:
        answer = requests.get(
            f"{pc.app}/live/frame{query}", headers=pc.headers(user), timeout=deadline(30)
        )
        assert answer.status_code == 200, answer.text[:500]
        return answer.content

    assert page_shown(live("bob")) == "blue"
    assert page_shown(live(None, "?scope=bob")) == "blue"
    assert page_shown(live("alice")) != "blue"
    assert page_shown(live(None)) != "blue"
    refused = pc.op("tabs/list", {"scope": "alice"}, user="bob", status=403)
    assert "its own scope ('bob')" in refused["error"]["message"], refused
    unknown = pc.op("cookies/get", {"scope": "carol"}, status=400)
    assert "no scope 'carol'" in unknown["error"]["message"], unknown
    assert "alice, bob" in unknown["error"]["message"], unknown
    # The log says which scope each op acted in.
    lines, _ = pc.log(before)
    ops = [x["action"] for x in lines if "op" in x.get("action", {})]
    scoped = {(a.get("op"), a.get("scope")) for a in ops}
    assert ("cookies/set", "bob") in scoped and ("tabs/open", "bob") in scoped, scoped
    cookie_set = [a for a in ops if a.get("op") == "cookies/set"]
    assert cookie_set and SECRET not in json.dumps(cookie_set)
    assert SECRET.encode() not in pc.all_log_bytes()
    pc.op("tabs/close", {"scope": "bob", "id": opened["id"]})
    pc.op("cookies/delete", {"scope": "bob"})


def _walk(
    pc: Computer, user: str, colours: list[str], walked: threading.Event, stop: threading.Event
) -> None:
    """``user``'s Playwright, clicking through ``colours`` a page at a time
    (each click a burst of its own: 1.5 s apart, past the recorder's quiet
    time); ``walked`` set once the last page has loaded."""
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(browser_url(pc, user), timeout=deadline(30) * 1000)
        page = browser.contexts[0].pages[0]
        page.bring_to_front()
        page.goto(f"{SITE}/c/{colours[0]}?next={','.join(colours[1:])}")
        for _ in colours[1:]:
            time.sleep(1.5)
            page.click("#go")
            page.wait_for_load_state("load")
        walked.set()
        stop.wait(deadline(60))
        browser.close()


def test_a_recording_per_scope_holds_only_its_own(
    pc: Computer, run_store: LocalStore, tmp_path: Path
) -> None:
    """Alice walks red pages and Bob blue ones, at once, each recorded."""
    keys = {u: f"scoped-{uuid.uuid4().hex[:8]}/{u}" for u in ("alice", "bob")}
    started = {
        u: pc.recording(
            "start",
            {
                "request_id": uuid.uuid4().hex,
                "upload": run_store.grant(keys[u], started_here=False),
                "scope": u,
            },
        )["recording_id"]
        for u in ("alice", "bob")
    }
    stop = threading.Event()
    walks = {
        "alice": ["red", "green", "red"],
        "bob": ["blue", "yellow", "blue"],
    }
    walked = {u: threading.Event() for u in walks}
    threads = [
        threading.Thread(target=_walk, args=(pc, u, c, walked[u], stop), daemon=True)
        for u, c in walks.items()
    ]
    for thread in threads:
        thread.start()
    for user, done in walked.items():
        assert done.wait(deadline(90)), f"{user}'s walk did not end"
    manifests = {
        u: pc.recording(
            "end",
            {"recording_id": started[u], "upload": run_store.grant(keys[u], started_here=False)},
        )
        for u in ("alice", "bob")
    }
    stop.set()
    for thread in threads:
        thread.join(deadline(60))
    for user, other in (("alice", "bob"), ("bob", "alice")):
        manifest = manifests[user]
        assert manifest["scope"] == user, manifest
        folder = tmp_path / user
        names, skipped = run_store.fetch(keys[user], started[user], folder)
        assert skipped == [] and "log.jsonl" in names, names
        lines = [json.loads(x) for x in (folder / "log.jsonl").read_text().splitlines()]
        # Its own agent's entries are there, and every entry is its scope's.
        mine = [x for x in lines if x.get("action", {}).get("who") == user]
        assert mine, f"{user}'s recording holds none of {user}'s entries"
        assert all(x.get("action", {}).get("who") != other for x in lines)
        assert {x.get("action", x.get("tab", {})).get("scope") for x in lines} == {user}
        # Its slice verifies on the log's hash chain, walked across the other
        # scope's lines by their hashes alone (none of their words).
        assert recording_problems(_reader(folder), manifest) == []
        links = [json.loads(x) for x in (folder / CHAIN_FILE).read_bytes().splitlines()]
        assert len([x for x in links if "prev" in x]) > 0 and len(links) > len(lines), links
        assert other.encode() not in (folder / CHAIN_FILE).read_bytes()
        # Each frame shows one of its own agent's pages, never the other's.
        frames = [f for f in manifest["frames"] if f["kind"] == "action"]
        assert frames, manifest
        shown = {page_shown((folder / f["file"]).read_bytes()) for f in manifest["frames"]}
        assert shown & set(walks[user]), (user, shown)
        assert not shown & set(walks[other]), (user, shown)
    # Left out, the scope is the home one, and a scope the computer lacks is refused.
    refused = pc.recording(
        "start",
        {
            "request_id": uuid.uuid4().hex,
            "upload": run_store.grant("scoped-x/none", started_here=False),
            "scope": "carol",
        },
        status=400,
    )
    assert "no scope 'carol'" in refused["error"]["message"], refused


async def test_the_control_tokens_mcp_calls_act_in_the_home_scope(pc: Computer) -> None:
    """The control token's own /mcp calls (no role, or a role that is no
    user) act in the home scope: they made a scope of their own before, and
    then failed as soon as its action began (a 2nd review)."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.support.mcp import text

    home = pc.op("tabs/open", {"url": SITE + "/c/green"})
    for role in (None, "grader"):
        headers = {"Authorization": f"Bearer {pc.control}"}
        if role is not None:
            headers["AgentEnv-Role"] = role
        http = httpx2.AsyncClient(headers=headers, timeout=deadline(120))
        transport = streamable_http_client(pc.app + "/mcp", http_client=http)
        async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
            listed = await client.call_tool("browser_tabs", {"action": "list"})
            assert not listed.is_error, text(listed)
            assert "/c/green" in text(listed), text(listed)
    pc.op("tabs/close", {"id": home["id"]})


def test_data_get_of_a_scope_holds_that_scopes_log_only(pc: Computer) -> None:
    import io
    import tarfile

    pc.op("navigate", {"url": SITE + "/c/red?alice-only"}, user="alice")
    pc.op("navigate", {"url": SITE + "/c/blue?bob-only"}, user="bob")
    for scope, mine, theirs in (
        ("bob", "bob-only", "alice-only"),
        ("alice", "alice-only", "bob-only"),
    ):
        archive = pc.op("data/get", {"scope": scope})
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            names = tar.getnames()
            log_name = next(n for n in names if n.endswith(".jsonl"))
            member = tar.extractfile(log_name)
            assert member is not None
            log_text = member.read().decode()
        assert mine in log_text and theirs not in log_text, (scope, names)


def test_every_scopes_downloads_folder_is_there_from_the_start(image: str) -> None:
    """A scope's folder made only on its first connection left its name free:
    another scope could download a file of that name first, block its
    downloads and hand it a file as its own (a 2nd review). Every folder is
    made when the relay meets Chromium, and a context an agent makes
    downloads into its scope's folder, not the folder above."""
    users = {"alice": "alice-tok-5152", "bob": "bob-tok-5253", "carol": "carol-tok-5354"}
    with computer(image, users=users) as fresh:
        listing = fresh.exec("ls", "-l", "/var/lib/agentenv/downloads", user="browser")
        for name in users:
            line = next((x for x in listing.splitlines() if x.endswith(f" {name}")), "")
            assert line.startswith("d"), listing  # a folder, before anyone connected
        import asyncio

        from tests.security.attacks import agent

        async def made_context_download() -> None:
            async with agent(fresh, "bob") as bob:
                made = (await bob.call("Target.createBrowserContext"))["result"]
                tab = await bob.call(
                    "Target.createTarget",
                    {"url": "about:blank", "browserContextId": made["browserContextId"]},
                )
                attached = await bob.call(
                    "Target.attachToTarget",
                    {"targetId": tab["result"]["targetId"], "flatten": True},
                )
                session = attached["result"]["sessionId"]
                await bob.evaluate(
                    session,
                    "(() => { const a = document.createElement('a');"
                    " a.href = URL.createObjectURL(new Blob(['x']));"
                    " a.download = 'carol'; document.body.append(a); a.click(); })()",
                )
                from tests.support.timing import wait_for

                wait_for(
                    lambda: (
                        "carol"
                        in fresh.exec("ls", "/var/lib/agentenv/downloads/bob", user="browser")
                    ),
                    "the made context's download in Bob's folder",
                    timeout_s=20,
                )

        asyncio.run(made_context_download())
        again = fresh.exec("ls", "-l", "/var/lib/agentenv/downloads", user="browser")
        assert next(x for x in again.splitlines() if x.endswith(" carol")).startswith("d"), again


def test_two_agents_in_one_shared_scope(
    image: str, run_network: Any, run_store: LocalStore, tmp_path: Path
) -> None:
    """Alice and Bob grouped into one scope share one browser (as intended):
    each sees the other's tabs, and the scope's recording holds both their
    entries; Carol, in a scope of her own, sees and records none of them."""
    users = {"alice": "alice-tok-6161", "bob": "bob-tok-6262", "carol": "carol-tok-6363"}
    scopes = {"alice": "team", "bob": "team"}
    with computer(image, users=users, scopes=scopes, network=run_network) as shared:
        serve_inside(shared, 8100)
        key = f"shared-{uuid.uuid4().hex[:8]}/team"
        started = shared.recording(
            "start",
            {
                "request_id": uuid.uuid4().hex,
                "upload": run_store.grant(key, started_here=False),
                "scope": "team",
            },
        )["recording_id"]
        opened = shared.op("navigate", {"url": SITE + "/c/red?alice"}, user="alice")
        assert opened["tab"] in {t["id"] for t in shared.op("tabs/list", user="bob")}
        assert opened["tab"] not in {t["id"] for t in shared.op("tabs/list", user="carol")}
        shared.op("navigate", {"url": SITE + "/c/blue?bob", "tab": opened["tab"]}, user="bob")
        shared.op("navigate", {"url": SITE + "/c/green?carol"}, user="carol")
        manifest = shared.recording(
            "end",
            {"recording_id": started, "upload": run_store.grant(key, started_here=False)},
        )
        assert manifest["scope"] == "team", manifest
        names, skipped = run_store.fetch(key, started, tmp_path)
        assert skipped == [] and "log.jsonl" in names, names
        lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
        who = {x["action"].get("who") for x in lines if "action" in x}
        assert {"alice", "bob"} <= who and "carol" not in who, who
        assert "?carol" not in (tmp_path / "log.jsonl").read_text()
        assert recording_problems(_reader(tmp_path), manifest) == []


def test_an_agents_downloads_are_listed_and_fetched_in_its_own_scope_only(pc: Computer) -> None:
    """Bob's Playwright downloads a file (Playwright's own download handling,
    over CDP); downloads/list and downloads/get give it back to Bob's token
    and to the control token naming his scope, and to no one else."""
    content = f"bob's report {uuid.uuid4().hex}"
    with sync_playwright() as pw:
        bob = pw.chromium.connect_over_cdp(browser_url(pc, "bob"), timeout=deadline(30) * 1000)
        page = bob.contexts[0].new_page()
        page.goto(SITE + "/c/green")
        with page.expect_download(timeout=deadline(30) * 1000) as fetched:
            page.evaluate(
                "text => { const a = document.createElement('a');"
                " a.href = URL.createObjectURL(new Blob([text])); a.download = 'report.txt';"
                " document.body.append(a); a.click(); }",
                content,
            )
        assert fetched.value.suggested_filename == "report.txt"
        fetched.value.failure()  # waits until the download is done (None: it worked)
        page.close()
        bob.close()
    listed = pc.op("downloads/list", {}, user="bob")
    mine = [d for d in listed if d["bytes"] == len(content.encode()) and not d["partial"]]
    assert len(mine) == 1, listed
    name = mine[0]["name"]
    answer = requests.post(
        f"{pc.app}/v1/browser/downloads/get",
        json={"name": name},
        headers=pc.headers("bob"),
        timeout=deadline(30),
    )
    assert answer.status_code == 200 and answer.content == content.encode(), answer.text[:300]
    assert answer.headers["Content-Type"] == "application/octet-stream"
    assert "attachment" in answer.headers["Content-Disposition"]
    assert name in {d["name"] for d in pc.op("downloads/list", {"scope": "bob"})}
    # Alice's token reads her own folder: Bob's file is not there, by any name.
    assert name not in {d["name"] for d in pc.op("downloads/list", {}, user="alice")}
    pc.op("downloads/get", {"name": name}, user="alice", status=404)
    pc.op("downloads/get", {"name": f"../bob/{name}"}, user="alice", status=400)
    pc.op("downloads/list", {"scope": "bob"}, user="alice", status=403)
    # On the record, as Bob's reads.
    reads = [
        line["action"]
        for line in pc.log()[0]
        if line.get("action", {}).get("op") in ("downloads/list", "downloads/get")
    ]
    assert {(a["who"], a["op"], a["acts"]) for a in reads} >= {
        ("bob", "downloads/list", "reading"),
        ("bob", "downloads/get", "reading"),
    }, reads


async def test_an_mcp_agents_file_tools_use_its_downloads_folder(pc: Computer) -> None:
    """Bob's Playwright MCP (issue 24, point 3): a file his page downloads is
    in his downloads folder, and ``browser_file_upload`` hands it to a page
    from there; what Playwright MCP writes (a screenshot's ``filename``)
    stays in its session's own folder. Alice's folder is not his."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.support.mcp import ref, ref_argument, text

    content = f"bob's mcp file {uuid.uuid4().hex[:8]}"
    name = f"mcp-{uuid.uuid4().hex[:8]}.txt"
    folder = "/var/lib/agentenv/downloads/bob"
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {pc.token('bob')}"}, timeout=deadline(120)
    )
    transport = streamable_http_client(pc.app + "/mcp", http_client=http)
    async with http, Client(transport, read_timeout_seconds=deadline(120)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        argument = ref_argument(tools["browser_click"])

        async def call(tool: str, args: dict[str, Any]) -> str:
            done = await client.call_tool(tool, args)
            assert not done.is_error, (tool, text(done))
            return text(done)

        assert "Page Title: green" in await call("browser_navigate", {"url": SITE + "/c/green"})
        await call(
            "browser_evaluate",
            {
                "function": "() => { const a = document.createElement('a');"
                f" a.href = URL.createObjectURL(new Blob([{json.dumps(content)}]));"
                f" a.download = {json.dumps(name)}; a.textContent = 'get the file';"
                " const i = document.createElement('input'); i.type = 'file';"
                " i.onchange = async () => { document.title = 'got ' + await i.files[0].text(); };"
                " document.body.append(a, i); }"
            },
        )
        snapshot = await call("browser_snapshot", {})
        await call("browser_click", {"element": "link", argument: ref(snapshot, 'link "get the')})
        deadline_at = time.monotonic() + deadline(20)
        while name not in {d["name"] for d in pc.op("downloads/list", {}, user="bob")}:
            assert time.monotonic() < deadline_at, pc.op("downloads/list", {}, user="bob")
            time.sleep(0.2)
        snapshot = await call("browser_snapshot", {})
        await call("browser_click", {"element": "chooser", argument: ref(snapshot, "button")})
        refused = await client.call_tool(
            "browser_file_upload", {"paths": ["/var/lib/agentenv/downloads/alice/x.txt"]}
        )
        assert refused.is_error and f"in the downloads folder {folder}" in text(refused)
        uploaded = await call("browser_file_upload", {"paths": [f"{folder}/{name}"]})
        assert f"Page Title: got {content}" in uploaded, uploaded
        # What Playwright MCP writes stays in the session's own folder: the
        # downloads folder is Chromium's user's, where a link could be put.
        await call("browser_take_screenshot", {"filename": "bobs-shot.png", "type": "png"})
        into = await client.call_tool(
            "browser_take_screenshot", {"filename": f"{folder}/planted.png", "type": "png"}
        )
        assert into.is_error and "never goes to the downloads folder" in text(into), text(into)
    listed = {d["name"]: d for d in pc.op("downloads/list", {}, user="bob")}
    assert listed[name]["bytes"] == len(content.encode()), listed
    assert "bobs-shot.png" not in listed and "planted.png" not in listed, listed
