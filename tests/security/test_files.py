"""Files of the machine handed to a page: file inputs, dropped files, download
folders. Only the downloads folder is reachable, after resolving links; on
this computer of two scopes, each scope's own folder inside it only."""

from __future__ import annotations

import pytest

from tests.security.attacks import Agent, agent, attempt, clean, guarded
from tests.support.container import SITE, Computer

DOWNLOADS = "/var/lib/agentenv/downloads"
#: Each scope's own downloads folder (alice's is the home scope's).
ALICE = f"{DOWNLOADS}/alice"
BOB = f"{DOWNLOADS}/bob"
SECRET_FILES = [
    "/etc/passwd",
    "/home/browser/profile/Default/Cookies",
    "/var/log/agentenv/browser-browser.jsonl",
    "/proc/self/environ",
    "/proc/1/cwd/etc/passwd",  # a link the relay may not read: it once dropped the connection
    f"{DOWNLOADS}/../../../../etc/passwd",
    "relative/path",
]


async def _file_input(who: Agent, session: str) -> int:
    """A file input added to the page: its backend node id."""
    made = await who.call(
        "Runtime.evaluate",
        {
            "expression": "(() => { const f = document.createElement('input');"
            " f.type = 'file'; document.body.append(f); return f; })()"
        },
        session,
    )
    described = await who.call(
        "DOM.describeNode", {"objectId": made["result"]["result"]["objectId"]}, session
    )
    return int(described["result"]["node"]["backendNodeId"])


@pytest.mark.parametrize("path", SECRET_FILES)
async def test_file_inputs_take_no_file_outside_the_downloads_folder(
    target: Computer, path: str
) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/")
        await alice.evaluate(
            session, "document.body.insertAdjacentHTML('beforeend', '<input type=file id=f>')"
        )
        document = await alice.call("DOM.getDocument", {}, session)
        found = await alice.call(
            "DOM.querySelector",
            {"nodeId": document["result"]["root"]["nodeId"], "selector": "#f"},
            session,
        )
        assert "error" not in found, found  # DOM.querySelector passes (the table)
        node = {"nodeId": found["result"]["nodeId"]}
        answer = await alice.call("DOM.setFileInputFiles", {"files": [path], **node}, session)
        assert "outside-downloads" in answer["error"]["message"]
        assert await alice.evaluate(session, "document.getElementById('f').files.length") == 0
        await alice.call("Target.closeTarget", {"targetId": tab})
    guarded(target, before, "DOM.setFileInputFiles", "outside-downloads")
    clean(target)


async def test_dropped_files_stay_in_the_downloads_folder(target: Computer) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/")
        drop = {
            "type": "drop",
            "x": 10,
            "y": 10,
            "data": {"items": [], "files": ["/etc/passwd"], "dragOperationsMask": 1},
        }
        answer = await alice.call("Input.dispatchDragEvent", drop, session)
        assert "outside-downloads" in answer["error"]["message"]
        await alice.call("Target.closeTarget", {"targetId": tab})
    guarded(target, before, "Input.dispatchDragEvent", "outside-downloads")
    clean(target)


async def test_a_file_from_the_downloads_folder_is_fine(target: Computer) -> None:
    target.exec("sh", "-c", f"echo hello > {ALICE}/upload.txt", user="browser")
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/")
        backend = await _file_input(alice, session)
        answer = await alice.call(
            "DOM.setFileInputFiles",
            {
                "files": [f"{ALICE}/upload.txt"],
                "backendNodeId": backend,
            },
            session,
        )
        assert "error" not in answer, answer
        names = await alice.evaluate(
            session, "[...document.querySelector('input[type=file]').files].map(f => f.name)"
        )
        assert names == ["upload.txt"]
        await alice.call("Target.closeTarget", {"targetId": tab})


async def test_downloads_land_in_the_downloads_folder_after_a_client_moved_them(
    target: Computer,
) -> None:
    """A client asks for /tmp (rewritten to the downloads folder), another sets
    Chromium's default and leaves: the next download still lands in the
    downloads folder, never the profile's own Downloads or /tmp."""
    before = attempt(target)
    async with agent(target) as alice:
        asked = {"behavior": "allow", "downloadPath": "/tmp/elsewhere"}
        answer = await alice.call("Browser.setDownloadBehavior", asked)
        assert "error" not in answer
        answer = await alice.call("Browser.setDownloadBehavior", {"behavior": "default"})
        assert "error" not in answer
    guarded(target, before, "Browser.setDownloadBehavior", "download-folder", action="rewritten")
    async with agent(target, "bob") as bob:
        tab, session = await bob.page(SITE + "/")
        await bob.evaluate(
            session,
            "(() => { const a = document.createElement('a');"
            " a.href = 'data:text/plain,downloaded-by-bob'; a.download = 'bob.txt';"
            " document.body.append(a); a.click(); })()",
        )
        from tests.support.timing import wait_for

        wait_for(
            lambda: "bob.txt" in target.exec("ls", BOB, user="browser"),
            "the download in Bob's downloads folder",
            timeout_s=20,
        )
        await bob.call("Target.closeTarget", {"targetId": tab})
    elsewhere = target.exec(
        "sh",
        "-c",
        f"ls /tmp/elsewhere /home/browser/Downloads {ALICE} {DOWNLOADS} 2>&1 || true",
        user="browser",
    )
    assert "bob.txt" not in elsewhere


async def test_a_scope_reaches_no_other_scopes_downloads(target: Computer) -> None:
    """What Alice downloaded is not Bob's to hand a page, and Bob cannot send
    his downloads into Alice's folder (issue 21: the folder was shared)."""
    target.exec("sh", "-c", f"echo alices-statement > {ALICE}/statement.txt", user="browser")
    before = attempt(target)
    async with agent(target, "bob") as bob:
        tab, session = await bob.page(SITE + "/")
        backend = await _file_input(bob, session)
        for path in (f"{ALICE}/statement.txt", f"{BOB}/../alice/statement.txt"):
            answer = await bob.call(
                "DOM.setFileInputFiles",
                {"files": [path], "backendNodeId": backend},
                session,
            )
            assert "outside-downloads" in answer["error"]["message"], answer
            assert BOB in answer["error"]["message"], answer  # his own folder, named
        answer = await bob.call(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": ALICE}
        )
        assert "error" not in answer, answer
        await bob.evaluate(
            session,
            "(() => { const a = document.createElement('a');"
            " a.href = 'data:text/plain,from-bob'; a.download = 'into-alice.txt';"
            " document.body.append(a); a.click(); })()",
        )
        from tests.support.timing import wait_for

        wait_for(
            lambda: "into-alice.txt" in target.exec("ls", BOB, user="browser"),
            "Bob's download in his own folder",
            timeout_s=20,
        )
        await bob.call("Target.closeTarget", {"targetId": tab})
    assert "into-alice.txt" not in target.exec("ls", ALICE, user="browser")
    guarded(target, before, "DOM.setFileInputFiles", "outside-downloads", who="bob")
    guarded(
        target,
        before,
        "Browser.setDownloadBehavior",
        "download-folder",
        who="bob",
        action="rewritten",
    )
    clean(target)
