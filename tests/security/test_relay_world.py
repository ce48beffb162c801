"""The relay's own world, where it checks for password fields: no agent sees
it or runs anything in it, by any route (the red team's critical finding:
one agent redefined a getter there, and another agent's password was then
written in clear).

Two agents share a tab in a shared scope (no scope stands between them: the
attack must fail there too). Bob's typing makes the relay build its world in
the tab; Alice then looks for it in every way a client can and tries to
poison it; then Bob types a password, which must still be withheld."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentenv.relay import ids
from tests.security.attacks import Agent, agent, attempt, clean
from tests.support.container import SITE, Computer, computer
from tests.support.timing import deadline, wait_for

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
    """Refused with a message of the relay's own (a rule that names no id)."""
    return "relay-world" in str(answer.get("error", {}).get("message", ""))


#: How Chromium answers a context it does not know; a refusal of the relay's
#: world by its number reads the same (it told the red team the number).
UNKNOWN_CONTEXT = {"code": -32000, "message": "Cannot find context with specified id"}


def _guarded(target: Computer, after: int, who: str = "alice") -> list[dict[str, Any]]:
    """Who's entries after ``after`` the guard refused for the relay's world."""
    return [
        x["action"]
        for x in target.log(after)[0]
        if x.get("action", {}).get("who") == who
        and (x["action"].get("guard") or {}).get("rule") == "relay-world"
    ]


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
        tried = attempt(target)
        for number in range(1, 81):
            answer = await alice.call(
                "Runtime.evaluate",
                {"expression": POISON, "contextId": number, "returnByValue": True},
                session,
            )
            # Anything that ran, ran in a context Alice was shown.
            ran = answer.get("result", {}).get("result", {}).get("value") == "poisoned"
            assert not ran or number in seen, (number, answer)
            if "error" in answer:
                assert number not in seen, (number, "a listed context was refused", answer)
            # 3. Through an object resolved into it.
            resolved = await alice.call(
                "DOM.resolveNode", {"backendNodeId": 1, "executionContextId": number}, session
            )
            found = resolved.get("result", {}).get("object", {}).get("objectId")
            if isinstance(found, str):
                called = await alice.call(
                    "Runtime.callFunctionOn",
                    {"functionDeclaration": POISON_FUNCTION, "objectId": found},
                    session,
                )
                assert "error" not in called or number not in seen, called
        # The relay's world was among the numbers tried (refused, not missed).
        refusals = len(wait_for(lambda: _guarded(target, tried), "alice's refusals", 20))
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


#: What only the relay's world answers with "string" (its mark is there alone).
PROBE = "typeof globalThis.__agentenvMark"


async def _world_in_tab(target: Computer, bob: Agent) -> tuple[str, str]:
    """Bob's tab, where his typing made the relay build its world."""
    before = attempt(target)
    tab, session = await bob.page(SITE + "/pixels")
    await bob.evaluate(session, "document.getElementById('q').focus()")
    await bob.call("Input.insertText", {"text": "boots"}, session)
    _typed(target, before, "bob")
    return tab, session


async def test_no_spelling_of_an_id_reaches_the_relays_world(target: Computer) -> None:
    """The fourth red team reached the world with ``{"contextId": 2.0}`` (the
    guard compared Python ints, and the relay forwarded the client's bytes)
    and with an object id ``"<isolate>.2\\u0000.1"`` (V8's strtoll stops at
    the NUL), then had bob's password logged in clear."""
    async with agent(target, "bob") as bob, agent(target, "alice") as alice:
        tab, bob_session = await _world_in_tab(target, bob)
        session = await _attach(alice, tab)
        await alice.call("Runtime.enable", {}, session)
        mine = await alice.call("Runtime.evaluate", {"expression": "({})"}, session)
        isolate = mine["result"]["result"]["objectId"].split(".")[0]
        tried = attempt(target)
        call = 10_000
        reached: list[str] = []
        for number in range(1, 41):
            for spelled in (
                f"{number}.0",
                f"{number}e0",
                f"{number}0e-1",
                f"{number}.00000000000000001",
            ):
                call += 1
                text = (
                    f'{{"id":{call},"method":"Runtime.evaluate","params":{{"expression":'
                    f'{json.dumps(PROBE)},"contextId":{spelled},"returnByValue":true}},'
                    f'"sessionId":"{session}"}}'
                )
                answer = await alice.raw(text, call)
                if answer.get("result", {}).get("result", {}).get("value") == "string":
                    reached.append(spelled)
            for k in (1, 2, 3):
                for form in (f"{number}\\u0000", f" {number}", f"+{number}", f"0{number}"):
                    call += 1
                    text = (
                        f'{{"id":{call},"method":"Runtime.callFunctionOn","params":{{'
                        f'"functionDeclaration":"function () {{ return {PROBE}; }}",'
                        f'"objectId":"{isolate}.{form}.{k}","returnByValue":true}},'
                        f'"sessionId":"{session}"}}'
                    )
                    answer = await alice.raw(text, call)
                    if answer.get("result", {}).get("result", {}).get("value") == "string":
                        reached.append(f"{isolate}.{form}.{k}")
        assert reached == [], f"the relay's world answered to {reached[:5]}"
        # Bob's password is still withheld: nothing in the world was changed.
        after = attempt(target)
        await bob.evaluate(bob_session, "document.getElementById('pw').focus()")
        await bob.call("Input.insertText", {"text": PASSWORD}, bob_session)
        await bob.call("Target.closeTarget", {"targetId": tab})
    typed = _typed(target, after, "bob")
    assert all("withheld" in json.dumps(entry) for entry in typed), typed
    # Each spelling was refused for its form, or for the world, on the record.
    rules = {
        (x["action"].get("guard") or {}).get("rule")
        for x in target.log(tried)[0]
        if x.get("action", {}).get("who") == "alice"
    }
    assert {"relay-world", "malformed-id"} <= rules, rules
    clean(target, PASSWORD)


async def test_no_answer_tells_which_number_is_the_relays_world(target: Computer) -> None:
    """``Runtime.globalLexicalScopeNames`` was refused exactly at the world's
    number, which told the red team which id to use: every number that is
    not one of Alice's contexts now reads as Chromium's unknown context."""
    async with agent(target, "bob") as bob, agent(target, "alice") as alice:
        tab, _ = await _world_in_tab(target, bob)
        session = await _attach(alice, tab)
        await alice.call("Runtime.enable", {}, session)
        await alice.evaluate(session, "1")
        seen = {
            e["params"]["context"]["id"]
            for e in alice.events
            if e.get("method") == "Runtime.executionContextCreated"
        }
        tried = attempt(target)
        errors: dict[int, Any] = {}
        for number in range(1, 41):
            for method in ("Runtime.globalLexicalScopeNames", "Runtime.compileScript"):
                params = {"executionContextId": number, "expression": "1", "sourceURL": ""}
                if method == "Runtime.compileScript":
                    params["persistScript"] = False
                answer = await alice.call(method, params, session)
                if number not in seen:
                    errors[number] = answer.get("error")
        await bob.call("Target.closeTarget", {"targetId": tab})
    odd = {n: e for n, e in errors.items() if e != UNKNOWN_CONTEXT}
    assert odd == {}, odd
    # The world was among the numbers asked for: refused, on the record.
    assert wait_for(lambda: _guarded(target, tried), "alice's refusals on the record", 20)


class _Loop:
    """An event loop in a thread: the differential test is a plain function
    (hypothesis drives it) that sends over one aiohttp connection."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(deadline(60))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(deadline(10))


@dataclass
class _Contexts:
    """Alice's session on Bob's tab (where the relay's world is), and her own
    contexts, each of which answers ``__who`` with its number."""

    loop: _Loop
    alice: Agent
    session: str
    own: dict[int, str]  # context -> an object id of hers in it
    calls: itertools.count[int]


@pytest.fixture(scope="module")
def contexts(target: Computer) -> Iterator[_Contexts]:
    loop = _Loop()
    stack = contextlib.AsyncExitStack()

    async def start() -> _Contexts:
        bob = await stack.enter_async_context(agent(target, "bob"))
        alice = await stack.enter_async_context(agent(target, "alice"))
        tab, _ = await _world_in_tab(target, bob)
        session = await _attach(alice, tab)
        await alice.call("Runtime.enable", {}, session)
        made = await alice.call("Page.createIsolatedWorld", {"frameId": tab}, session)
        numbers = {made["result"]["executionContextId"]}
        numbers |= {
            e["params"]["context"]["id"]
            for e in alice.events
            if e.get("method") == "Runtime.executionContextCreated"
        }
        own: dict[int, str] = {}
        for number in sorted(numbers):
            answer = await alice.call(
                "Runtime.evaluate",
                {"expression": f"globalThis.__who = {number}; ({{}})", "contextId": number},
                session,
            )
            found = answer.get("result", {}).get("result", {}).get("objectId")
            if isinstance(found, str):
                own[number] = found
        return _Contexts(loop, alice, session, own, itertools.count(50_000))

    try:
        yield loop.run(start())
    finally:
        loop.run(stack.aclose())
        loop.close()


#: A number as a JSON writer might spell it: plain, with a fraction, an
#: exponent, digits past what a double holds.
_SPELLINGS = st.tuples(
    st.integers(-3, 45),
    st.sampled_from(["", ".0", "e0", "0e-1", ".5", ".0000000000000001", "E+0", "e-0"]),
)


def _spell(number: int, form: str) -> str:
    """Valid JSON always (a leading zero is not: "00e-1" gets no answer by id)."""
    return f"{number * 10}e-1" if form == "0e-1" else f"{number}{form}"


def _ran_in(answer: dict[str, Any]) -> Any:
    return answer.get("result", {}).get("result", {}).get("value")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spelling=_SPELLINGS)
def test_the_relay_reads_a_context_number_as_chromium_does(
    contexts: _Contexts, spelling: tuple[int, str]
) -> None:
    """A differential: the rules' reading of a context number (the relay's
    own code, here) against where Chromium ran the command in the image."""
    text = _spell(*spelling)
    call = next(contexts.calls)
    message = (
        f'{{"id":{call},"method":"Runtime.evaluate","params":{{"expression":'
        f'"globalThis.__who ?? ({PROBE})","contextId":{text},"returnByValue":true}},'
        f'"sessionId":"{contexts.session}"}}'
    )
    answer = contexts.loop.run(contexts.alice.raw(message, call))
    ran = _ran_in(answer)
    assert ran != "string", f"{text} reached the relay's world"
    read = ids.canonical(orjson.loads(text))
    if ids.problem("Runtime.evaluate", {"contextId": read}) is not None:
        assert "malformed-id" in answer["error"]["message"], (text, answer)
    elif read in contexts.own:
        assert ran == read, (text, read, answer)  # Chromium ran it where the rules read
    else:
        assert answer.get("error") == UNKNOWN_CONTEXT or ran is None, (text, read, answer)


_MUTATIONS = st.sampled_from(["", " ", "+", "0", "00", "\\u0000", "\\u0000x", "-"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=st.integers(0, 2), mutation=_MUTATIONS, before=st.booleans(), other=st.integers(0, 45))
def test_the_relay_reads_an_object_id_as_v8_does(
    contexts: _Contexts, where: int, mutation: str, before: bool, other: int
) -> None:
    """A differential on object ids: one part of one of Alice's own ids
    changed (another number, a sign, a space, zeros, a NUL), read by the
    rules and by V8 in the image."""
    _context, remote = sorted(contexts.own.items())[other % len(contexts.own)]
    parts = remote.split(".")
    if other % 3 == 0:  # another context's number in the middle
        parts[1] = str(other)
    parts[where] = mutation + parts[where] if before else parts[where] + mutation
    spelled = ".".join(parts)
    call = next(contexts.calls)
    message = (
        f'{{"id":{call},"method":"Runtime.callFunctionOn","params":{{"functionDeclaration":'
        f'"function () {{ return globalThis.__who ?? ({PROBE}); }}","objectId":"{spelled}",'
        f'"returnByValue":true}},"sessionId":"{contexts.session}"}}'
    )
    answer = contexts.loop.run(contexts.alice.raw(message, call))
    ran = _ran_in(answer)
    assert ran != "string", f"{spelled} reached the relay's world"
    value = orjson.loads(f'"{spelled}"')
    if ids.problem("Runtime.callFunctionOn", {"objectId": value}) is not None:
        assert "malformed-id" in answer["error"]["message"], (spelled, answer)
    elif ran is not None:
        assert ran == ids.context_of(value), (spelled, answer)  # where the rules read


async def test_a_pause_holds_no_frame_of_the_relays_world_for_anyone(target: Computer) -> None:
    """A review of issue 40's change: alice paused the tab (Debugger.pause)
    and typed, so the relay's check paused in its own world; from a second
    connection, ``Debugger.evaluateOnCallFrame`` with a frame id naming the
    page's own context ran in that paused frame (V8 takes the frame by its
    number in the pause now current), 2 of 600 tries, and bob's password was
    then logged in clear. Nothing pauses the relay's script now, and a frame
    must be one of the pause shown to a client."""
    async with (
        agent(target, "bob") as bob,
        agent(target, "alice") as one,
        agent(target, "alice") as two,
    ):
        tab, bob_session = await _world_in_tab(target, bob)
        first = await _attach(one, tab)
        second = await _attach(two, tab)
        await two.call("Runtime.enable", {}, second)
        mine = await two.call("Runtime.evaluate", {"expression": "({})"}, second)
        isolate, context, _ = mine["result"]["result"]["objectId"].split(".")
        await one.call("Debugger.enable", {}, first)
        reached: list[Any] = []
        for round_ in range(3):
            await one.call("Debugger.pause", {}, first)
            # alice's typing has the relay check for a password field, in its world
            await one.ws.send_json(
                {
                    "id": 90 + round_,
                    "method": "Input.insertText",
                    "params": {"text": "z"},
                    "sessionId": first,
                }
            )
            calls = range(1000 * (round_ + 1), 1000 * (round_ + 1) + 400)
            for call in calls:
                await two.ws.send_json(
                    {
                        "id": call,
                        "method": "Debugger.evaluateOnCallFrame",
                        "params": {
                            "callFrameId": f"{isolate}.{context}.0",
                            "expression": f"'reached:' + ({PROBE})",
                            "returnByValue": True,
                        },
                        "sessionId": second,
                    }
                )
            got = 0
            while got < len(calls):
                answer = await two.ws.receive_json(timeout=deadline(30))
                if answer.get("id") in calls:
                    got += 1
                    value = answer.get("result", {}).get("result", {}).get("value")
                    if value == "reached:string":
                        reached.append(answer["id"])
            await one.call("Debugger.resume", {}, first)
        await one.call("Debugger.disable", {}, first)
        assert reached == [], f"{len(reached)} calls ran in the relay's world"
        after = attempt(target)
        await bob.evaluate(bob_session, "document.getElementById('pw').focus()")
        await bob.call("Input.insertText", {"text": PASSWORD}, bob_session)
        await bob.call("Target.closeTarget", {"targetId": tab})
    typed = _typed(target, after, "bob")
    assert all("withheld" in json.dumps(entry) for entry in typed), typed
    clean(target, PASSWORD)


async def test_a_binding_in_every_context_tells_nothing_of_the_relays_world(
    target: Computer,
) -> None:
    """A review: ``Runtime.addBinding {name: "String"}`` with no context is
    added to the relay's world too; its checks called it, so alice was sent
    the world's number and what each check read, and bob's plain typing was
    logged as a withheld password."""
    async with agent(target, "bob") as bob, agent(target, "alice") as alice:
        tab, bob_session = await _world_in_tab(target, bob)
        session = await _attach(alice, tab)
        await alice.call("Runtime.enable", {}, session)
        await alice.call("Runtime.addBinding", {"name": "String"}, session)
        before = attempt(target)
        await bob.evaluate(bob_session, "document.getElementById('q').focus()")
        await bob.call("Input.insertText", {"text": "plain-boots"}, bob_session)
        await bob.evaluate(bob_session, "document.getElementById('pw').focus()")
        await bob.call("Input.insertText", {"text": PASSWORD}, bob_session)
        await alice.evaluate(session, "1")  # what was sent her has arrived
        called = [e for e in alice.events if e.get("method") == "Runtime.bindingCalled"]
        assert called == [], called
        await bob.call("Target.closeTarget", {"targetId": tab})
    typed = _typed(target, before, "bob")
    texts = [json.dumps(entry.get("params")) for entry in typed]
    assert any("plain-boots" in text for text in texts), texts  # the check still reads
    assert not any(PASSWORD in text for text in texts), texts
    clean(target, PASSWORD)


async def test_a_clients_pause_stops_in_the_page_not_in_the_relays_check(
    target: Computer,
) -> None:
    """``Debugger.pause`` stops at the next script to run. Typing has the relay
    check for a password field first, in its world: that pause is undone and
    asked for again, so the client's pause stops where the page runs next, in
    the field's handler, as on plain Chromium (CI lost a client's pause this
    way: no ``Debugger.paused`` came)."""
    async with agent(target, "alice") as alice:
        tab, session = await alice.page(SITE + "/")
        await alice.evaluate(
            session,
            "const field = document.getElementById('search'); field.focus();"
            "field.oninput = function typed() { document.title = field.value; }; 1",
        )
        await alice.call("Debugger.enable", {}, session)
        paused_at: list[str] = []
        for round_ in range(3):
            assert "error" not in await alice.call("Debugger.pause", {}, session)
            typed = {
                "id": 500 + round_,
                "method": "Input.insertText",
                "params": {"text": "z"},
                "sessionId": session,
            }
            await alice.ws.send_json(typed)  # answered once the handler ran
            paused = await alice.event("Debugger.paused", timeout_s=20)
            paused_at.append(paused["params"]["callFrames"][0]["functionName"])
            await alice.call("Debugger.resume", {}, session)
            while not any(x.get("id") == typed["id"] for x in alice.events):
                alice.events.append(await alice._next(deadline(20)))
        await alice.call("Debugger.disable", {}, session)
        assert paused_at == ["typed"] * 3, paused_at
        assert await alice.evaluate(session, "document.title") == "zzz"
        await alice.call("Target.closeTarget", {"targetId": tab})
