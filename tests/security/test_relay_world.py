"""The relay's own world, where it checks for password fields: no agent sees
it or runs anything in it, by any route (the red team's critical finding:
one agent redefined a getter there, and another agent's password was then
written in clear).

Two agents share a tab in a shared scope (no scope stands between them: the
attack must fail there too). Bob's typing makes the relay build its world in
the tab; Alice then looks for it in every way a client can and tries to
poison it; then Bob types a password, which must still be withheld."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.security.attacks import Agent, agent, attempt, clean
from tests.support.container import SITE, Computer, computer
from tests.support.timing import wait_for

PASSWORD = "tr0ub4dor-and-3-relay-world"

#: What the red team ran in the world: every later check in the document
#: reads a password field as a text field.
POISON = (
    "Object.defineProperty(HTMLInputElement.prototype, 'type', "
    "{get() { return 'text'; }, configurable: true});"
    "Element.prototype.getAttribute = function () { return null; }; 'poisoned'"
)
POISON_FUNCTION = f"function () {{ {POISON} }}"


@pytest.fixture(scope="module")
def target(image: str) -> Iterator[Computer]:
    """Alice and Bob in one shared scope: the relay's world must hold there too."""
    with computer(image, scopes={"alice": "team", "bob": "team"}) as running:
        running.serve_site()
        yield running


def _refused(answer: dict[str, Any]) -> bool:
    return "relay-world" in str(answer.get("error", {}).get("message", ""))


async def _find_tab(bob: Agent, url: str) -> tuple[str, str]:
    tab, session = await bob.page(url)
    return tab, session


async def _attach(alice: Agent, tab: str) -> str:
    attached = await alice.call("Target.attachToTarget", {"targetId": tab, "flatten": True})
    return str(attached["result"]["sessionId"])


def _typed(target: Computer, after: int, who: str) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]] | None:
        got = [
            x["action"]
            for x in target.log(after)[0]
            if x.get("action", {}).get("method") == "Input.insertText"
            and x["action"].get("who") == who
            and "ok" in x["action"]
        ]
        return got or None

    return wait_for(found, f"{who}'s typing in the log", timeout_s=20)


async def test_no_agent_sees_or_reaches_the_relays_world(target: Computer) -> None:
    before = attempt(target)
    async with agent(target, "bob") as bob, agent(target, "alice") as alice:
        tab, bob_session = await _find_tab(bob, SITE + "/pixels")
        # Bob types in a plain field: the relay builds its world in the tab.
        await bob.evaluate(bob_session, "document.getElementById('q').focus()")
        await bob.call("Input.insertText", {"text": "shoes"}, bob_session)
        _typed(target, before, "bob")

        session = await _attach(alice, tab)
        # 1. Listed? Runtime.enable reports every context of the tab.
        await alice.call("Runtime.enable", {}, session)
        await alice.call("Debugger.enable", {}, session)
        await alice.evaluate(session, "1")  # let the events arrive
        contexts = [
            e["params"]["context"]
            for e in alice.events
            if e.get("method") == "Runtime.executionContextCreated"
        ]
        assert contexts, "Runtime.enable listed no context at all"
        names = [str(c.get("name", "")) for c in contexts]
        assert not [n for n in names if n.startswith("agentenv")], names
        seen = {c["id"] for c in contexts}

        # 2. By number: context ids are small and sequential; try them all.
        refusals = 0
        for number in range(1, 81):
            answer = await alice.call(
                "Runtime.evaluate",
                {"expression": POISON, "contextId": number, "returnByValue": True},
                session,
            )
            if _refused(answer):
                refusals += 1
                assert number not in seen, (number, "a listed context was refused")
            else:
                # Anything that ran, ran in a context Alice was shown.
                ran = answer.get("result", {}).get("result", {}).get("value") == "poisoned"
                assert not ran or number in seen, (number, answer)
            # 3. Through an object resolved into it.
            resolved = await alice.call(
                "DOM.resolveNode", {"backendNodeId": 1, "executionContextId": number}, session
            )
            if _refused(resolved):
                refusals += 1
                continue
            found = resolved.get("result", {}).get("object", {}).get("objectId")
            if isinstance(found, str):
                called = await alice.call(
                    "Runtime.callFunctionOn",
                    {"functionDeclaration": POISON_FUNCTION, "objectId": found},
                    session,
                )
                assert not _refused(called) or number not in seen, called
        # The relay's world was among the numbers tried (it is refused, not missed).
        assert refusals >= 2, refusals
        # 4. By a name: a world of that name would be the relay's.
        made = await alice.call(
            "Page.createIsolatedWorld",
            {"frameId": tab, "worldName": "agentenv-relay"},
            session,
        )
        mine = made["result"]["executionContextId"]
        await alice.call("Runtime.evaluate", {"expression": POISON, "contextId": mine}, session)
        # 5. A condition on every script without a URL (the relay's have none).
        conditional = await alice.call(
            "Debugger.setBreakpointByUrl",
            {"lineNumber": 0, "urlRegex": ".*", "condition": POISON.replace("'poisoned'", "false")},
            session,
        )
        assert _refused(conditional), conditional

        # 6. A world the check made in a same-origin frame: Bob types in a
        # frame's field, and the check looks into it (Blink makes the relay's
        # world there too; from it, ``parent`` is the main frame's world).
        await bob.evaluate(
            bob_session,
            "new Promise(done => { const f = document.createElement('iframe');"
            " f.id = 'inner'; f.srcdoc = '<input id=i>'; f.onload = () => done(1);"
            " document.body.append(f); })",
        )
        await bob.evaluate(
            bob_session,
            "document.getElementById('inner').contentDocument.getElementById('i').focus()",
        )
        await bob.call("Input.insertText", {"text": "framed"}, bob_session)
        probe = (
            "[typeof globalThis.__agentenvMark, (() => { try {"
            " return typeof parent.__agentenvMark; } catch (e) { return 'none'; } })()].join()"
        )
        for number in range(1, 81):
            answer = await alice.call(
                "Runtime.evaluate",
                {"expression": probe, "contextId": number, "returnByValue": True},
                session,
            )
            value = answer.get("result", {}).get("result", {}).get("value")
            assert value is None or "string" not in str(value), (number, value)
        # 7. A heap object by its snapshot id may be any world's object.
        heap = await alice.call(
            "HeapProfiler.addInspectedHeapObject", {"heapObjectId": "1"}, session
        )
        assert _refused(heap), heap

        # Bob types his password into the password field.
        after = attempt(target)
        await bob.evaluate(bob_session, "document.getElementById('pw').focus()")
        await bob.call("Input.insertText", {"text": PASSWORD}, bob_session)
        assert await bob.evaluate(bob_session, "document.getElementById('pw').value") == PASSWORD
        # No event of the relay's world reached Alice at any point: every
        # context she heard of is the page's, or one she made herself.
        created = [
            e["params"]["context"]
            for e in alice.events
            if e.get("method") == "Runtime.executionContextCreated"
        ]
        strange = [
            c for c in created if str(c.get("name", "")).startswith("agentenv") and c["id"] != mine
        ]
        assert strange == [], strange
        await bob.call("Target.closeTarget", {"targetId": tab})
    typed = _typed(target, after, "bob")
    assert all("withheld" in json.dumps(entry) for entry in typed), typed
    # Alice's attempts are on the record, each with what the guard did.
    lines, _ = target.log(before)
    guarded = [
        x["action"]
        for x in lines
        if x.get("action", {}).get("who") == "alice"
        and (x["action"].get("guard") or {}).get("rule") == "relay-world"
    ]
    assert len(guarded) >= refusals, guarded
    clean(target, PASSWORD)
