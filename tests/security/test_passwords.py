"""Every way text can reach a password field is typing, and is withheld:
keystrokes, inserted text, text dropped on it, a value attribute set by CDP,
an MCP tool, a pixel op."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from tests.security.attacks import agent, attempt, by, clean, entries
from tests.support.container import SITE, Computer
from tests.support.timing import wait_for

PASSWORD = "correct-horse-battery-9137"


def _entries(target: Computer, after: int, method: str) -> list[dict[str, object]]:
    def found() -> list[dict[str, object]] | None:
        got = [
            x["action"]
            for x in target.log(after)[0]
            if "action" in x and x["action"].get("method") == method
        ]
        return got or None

    return wait_for(found, f"the log to hold {method}", timeout_s=20)


def _find(node: dict[str, Any], element_id: str) -> int | None:
    attributes = node.get("attributes") or []
    if "id" in attributes[::2] and attributes[attributes.index("id") + 1] == element_id:
        return int(node["nodeId"])
    for child in node.get("children") or []:
        found = _find(child, element_id)
        if found is not None:
            return found
    return None


async def test_cdp_typing_dropping_and_setting_a_password(target: Computer) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        await alice.evaluate(session, "document.getElementById('pw').focus()")
        await alice.call("Input.insertText", {"text": PASSWORD}, session)
        for char in PASSWORD[:4]:
            await alice.call(
                "Input.dispatchKeyEvent", {"type": "keyDown", "key": char, "text": char}, session
            )
            await alice.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": char}, session)
        # Text dropped on the password field (at 250, 275: #pw on /pixels).
        for kind in ("dragEnter", "dragOver", "drop"):
            await alice.call(
                "Input.dispatchDragEvent",
                {
                    "type": kind,
                    "x": 250,
                    "y": 275,
                    "data": {
                        "items": [{"mimeType": "text/plain", "data": PASSWORD}],
                        "dragOperationsMask": 1,
                    },
                },
                session,
            )
        # A value attribute set through DOM, on the password input.
        document = await alice.call("DOM.getDocument", {"depth": -1}, session)
        node = _find(document["result"]["root"], "pw")
        assert node is not None, "no #pw in the document"
        answer = await alice.call(
            "DOM.setAttributeValue", {"nodeId": node, "name": "value", "value": PASSWORD}, session
        )
        assert "error" not in answer, answer
        typed = await alice.evaluate(session, "document.getElementById('pw').value")
        assert PASSWORD in str(typed)  # it reached the page
        await alice.call("Target.closeTarget", {"targetId": tab})
    for method in (
        "Input.insertText",
        "Input.dispatchKeyEvent",
        "Input.dispatchDragEvent",
        "DOM.setAttributeValue",
    ):
        for entry in _entries(target, before, method):
            assert "withheld" in json.dumps(entry), entry
    clean(target, PASSWORD, PASSWORD[:4])


#: A password field in a closed shadow root whose host is the page itself or
#: an editable element: the focused element the check sees is the host,
#: which it used to clear as "the page" or "an editable field".
CLOSED_HOSTS = {
    "body": "document.body",
    "editable": (
        "(() => { const h = document.createElement('div'); h.contentEditable = 'true';"
        " h.textContent = 'x'; document.body.append(h); return h; })()"
    ),
    # The page keeps the caret in the host's own content (a non-editable span)
    # while the focus stays in the field: the caret is no proof (5th red team).
    "editable-caret-moved": (
        "(() => { const h = document.createElement('div'); h.contentEditable = 'true';"
        " h.innerHTML = 'x<span contenteditable=false>s</span>'; document.body.append(h);"
        " const span = h.querySelector('span');"
        " window.moveCaret = () => setTimeout(() => getSelection().collapse(span.firstChild, 0));"
        " return h; })()"
    ),
}
#: Run after the field has the focus (the caret-moving page does it on every key).
AFTER_FOCUS = (
    "if (window.moveCaret) { for (const e of ['focus', 'input', 'keyup', 'keydown'])"
    " window.pwField.addEventListener(e, window.moveCaret); window.moveCaret(); }"
)


@pytest.mark.parametrize("host", sorted(CLOSED_HOSTS))
async def test_a_password_field_in_a_closed_shadow_root(target: Computer, host: str) -> None:
    before = attempt(target)
    secret = f"shadow-{host}-{PASSWORD}"
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        build = (
            f"document.body.replaceChildren(); window.pwHost = {CLOSED_HOSTS[host]};"
            " const root = window.pwHost.attachShadow({mode: 'closed'});"
            " root.innerHTML = '<input type=password>';"
            " window.pwField = root.querySelector('input'); window.pwField.focus();"
            f" {AFTER_FOCUS}; document.activeElement.tagName"
        )
        assert await alice.evaluate(session, build) in ("BODY", "DIV")
        await asyncio.sleep(0.1)
        await alice.call("Input.insertText", {"text": secret}, session)
        for char in secret[:3]:
            await alice.call(
                "Input.dispatchKeyEvent", {"type": "keyDown", "key": char, "text": char}, session
            )
        assert secret in str(await alice.evaluate(session, "window.pwField.value"))
        await alice.call("Target.closeTarget", {"targetId": tab})
    for method in ("Input.insertText", "Input.dispatchKeyEvent"):
        for entry in _entries(target, before, method):
            assert "withheld" in json.dumps(entry), entry
    clean(target, secret)


async def test_a_password_field_under_many_open_shadow_roots(target: Computer) -> None:
    """Under 33 nested open roots of editable hosts the check stopped at the
    32nd and cleared it as an editable element (6th red team)."""
    before = attempt(target)
    secret = f"deep-{PASSWORD}"
    build = (
        "document.body.replaceChildren(); let host = document.body;"
        " for (let i = 0; i < 40; i++) { const d = document.createElement('div');"
        " d.contentEditable = 'true'; host.append(d); host = d.attachShadow({mode: 'open'}); }"
        " host.innerHTML = '<input type=password>'; window.pwField = host.querySelector('input');"
        " window.pwField.focus(); document.activeElement.tagName"
    )
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        assert await alice.evaluate(session, build) == "DIV"
        await alice.call("Input.insertText", {"text": secret}, session)
        assert secret in str(await alice.evaluate(session, "window.pwField.value"))
        await alice.call("Target.closeTarget", {"targetId": tab})
    for entry in _entries(target, before, "Input.insertText"):
        assert "withheld" in json.dumps(entry), entry
    clean(target, secret)


@pytest.mark.parametrize(
    "focus",
    [
        "document.getElementById('q').focus()",
        # An editable element hosting no shadow root: Chromium is asked, and clears it.
        "(() => { const e = document.createElement('div'); e.contentEditable = 'true';"
        " document.body.append(e); e.focus(); })()",
        "document.activeElement.blur()",  # the page itself
    ],
)
async def test_typing_a_visible_field_is_kept(target: Computer, focus: str) -> None:
    before = attempt(target)
    async with agent(target) as alice:
        tab, session = await alice.page(SITE + "/pixels")
        await alice.evaluate(session, focus)
        await alice.call("Input.insertText", {"text": "red shoes"}, session)
        await alice.call("Target.closeTarget", {"targetId": tab})
    [entry] = _entries(target, before, "Input.insertText")
    assert entry["params"] == {"text": "red shoes"}


def test_pixel_ops_typing_a_password(target: Computer) -> None:
    before = attempt(target)
    tab = target.op("tabs/open", {"url": SITE + "/pixels"})["id"]
    wait_for(lambda: target.op("tabs/list")[0]["title"] == "Pixels", "the pixels page")
    target.op("input/click", {"x": 200, "y": 275}, user="alice")
    target.op("input/type", {"text": PASSWORD}, user="alice")
    ops = wait_for(
        lambda: (
            [
                x["action"]
                for x in target.log(before)[0]
                if "action" in x and x["action"].get("op") == "input/type"
            ]
            or None
        ),
        "the input/type entry",
        timeout_s=20,
    )
    assert ops[0]["args"]["text"] == {"withheld": "password", "length": len(PASSWORD)}
    assert ops[0]["who"] == "alice" and ops[0]["via"] == "api"
    target.op("tabs/close", {"id": tab})
    clean(target, PASSWORD)


def test_a_tool_call_header_cannot_smuggle_a_password(target: Computer) -> None:
    """The tool call's own arguments hold the text under names of its own."""
    before = attempt(target)
    tab = _password_focused(target)
    said = _tool_call("c-1", {"input": {"value": PASSWORD}})
    target.op("input/type", {"text": PASSWORD}, user="alice", headers=said)
    target.op("tabs/close", {"id": tab})
    [entry] = entries(target, before, "the tool call's input/type", by(call="c-1"))
    withheld = {"withheld": "password", "length": len(PASSWORD)}
    assert entry["op"] == "input/type" and entry["args"] == {"input": {"value": withheld}}, entry
    clean(target, PASSWORD)


def _password_focused(target: Computer) -> str:
    """A tab at /pixels with alice's click in its password field."""
    tab = str(target.op("tabs/open", {"url": SITE + "/pixels"})["id"])
    wait_for(lambda: target.op("tabs/list")[0]["title"] == "Pixels", "the pixels page")
    target.op("input/click", {"x": 200, "y": 275}, user="alice")
    return tab


def _tool_call(call: str, args: dict[str, Any]) -> dict[str, str]:
    coded = base64.urlsafe_b64encode(json.dumps(args).encode()).decode().rstrip("=")
    return {"AgentEnv-Tool-Call": f"tool=computer; call={call}; args={coded}"}


def test_a_harness_typing_key_by_key_keeps_the_password_out_of_its_args(
    target: Computer,
) -> None:
    """A computer-use harness sends one key at a time, each call's arguments
    holding the whole text (or padded, "type X please"): only arguments equal
    to the typed text were withheld (6th red team)."""
    secret = "Keyed-" + PASSWORD
    before = attempt(target)
    tab = _password_focused(target)
    for n, key in enumerate(secret[:3]):
        said = {"action": "type", "text": secret, "note": f"type {secret} please"}
        target.op("input/key", {"keys": key}, user="alice", headers=_tool_call(f"k-{n}", said))
    target.op("tabs/close", {"id": tab})
    keyed = entries(target, before, "three input/key calls", by(op="input/key"), 3)
    assert [a["call"] for a in keyed] == ["k-0", "k-1", "k-2"], keyed
    for entry in keyed:
        assert entry["args"]["text"] == {"withheld": "password", "length": len(secret)}, entry
        assert entry["args"]["note"]["withheld"] == "password", entry
    clean(target, secret)


def test_local_storage_values_stay_out_of_the_log(target: Computer) -> None:
    """local_storage/set (and a data/add restore) wrote the items into the
    evaluate expression the log keeps (6th red team)."""
    token = "ls-" + PASSWORD
    origin = SITE
    before = attempt(target)
    target.op("local_storage/set", {"origin": origin, "items": {"access_token": token}})
    got = target.op("local_storage/get", {"origin": origin})
    assert token in json.dumps(got)
    target.op("local_storage/clear", {"origin": origin})
    [entry] = entries(target, before, "local_storage/set", by(op="local_storage/set"))
    assert entry["args"]["items"] == {"access_token": {"withheld": "secret", "length": len(token)}}
    clean(target, token)
