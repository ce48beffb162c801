"""Tab events and their causes, with a fake clock (no browser)."""

from __future__ import annotations

import json
from typing import Any

from agentenv.relay.causes import CLAIM_WINDOW_S, HOLD_S, Causes, Served, TabCommand, origin
from agentenv.relay.known import TargetSeen

ALICE: dict[str, Any] = {"kind": "command", "via": "cdp", "who": "alice"}


def by(entry: int) -> dict[str, Any]:
    return ALICE | {"entry": entry}


def cmd(entry: int, method: str, tab: str | None) -> TabCommand:
    return TabCommand(entry, method, tab, by(entry))


def test_create_target_claims_opened_and_first_navigation() -> None:
    c = Causes()
    c.known("A", "about:blank")
    c.sent(cmd(5, "Target.createTarget", None))
    assert c.created("B", "about:blank", None, 1.0) == []  # held: the open is in flight
    out = c.answered(5, True, "B", 1.1)
    assert out == [{"event": "opened", "id": "B", "url": "about:blank", "by": by(5)}]
    assert c.navigated("B", "http://x/", 1.2) == [
        {"event": "navigated", "id": "B", "url": "http://x/", "by": by(5)}
    ]
    # A later navigation with nothing in flight: the page, after nothing acted.
    assert c.navigated("B", "http://x/2", 2.0)[0]["by"] == {"kind": "page", "after": None}


def test_answer_before_event() -> None:
    c = Causes()
    c.sent(cmd(5, "Target.createTarget", None))
    assert c.answered(5, True, "B", 1.0) == []
    assert c.created("B", "", None, 1.1)[0]["by"] == by(5)


def test_navigate_claims_one_navigation_then_the_page_is_credited() -> None:
    c = Causes()
    c.known("A", "about:blank")
    c.acting("A", 3, "Input.dispatchMouseEvent", 0.5)
    c.sent(cmd(7, "Page.navigate", "A"))
    c.acting("A", 7, "Page.navigate", 1.0)
    c.answered(7, True, None, 1.2)
    assert c.navigated("A", "http://a/", 1.3)[0]["by"] == by(7)
    c.acting("A", 9, "Input.dispatchMouseEvent", 2.0)
    c.acting("A", 10, "Runtime.callFunctionOn", 2.1)  # the client's own check after the click
    assert c.navigated("A", "http://a/next", 2.2)[0]["by"] == {"kind": "page", "after": 9}
    c.acting("A", 11, "Runtime.evaluate", 9.0)  # a script that navigates, long after
    assert c.navigated("A", "http://a/js", 9.1)[0]["by"] == {"kind": "page", "after": 11}


def test_reload_credits_only_once_answered_ok() -> None:
    c = Causes()
    c.known("A", "http://a/")
    c.sent(cmd(4, "Page.reload", "A"))
    assert c.navigated("A", "http://a/", 1.0) == []  # held until the reload is answered
    assert c.answered(4, True, None, 1.1)[0]["by"] == by(4)
    # A history move with nowhere to go credits nothing after it.
    c.sent(cmd(6, "Page.navigateToHistoryEntry", "A"))
    c.answered(6, False, None, 2.0)
    assert c.navigated("A", "http://a/x", 2.1)[0]["by"]["kind"] == "page"


def test_held_event_released_after_its_deadline() -> None:
    c = Causes()
    c.known("A", "http://a/")
    c.sent(cmd(4, "Page.navigateToHistoryEntry", "A"))
    assert c.navigated("A", "http://a/b", 1.0) == []
    assert c.tick(1.0 + HOLD_S - 0.1) == []
    out = c.tick(1.0 + HOLD_S)
    assert out[0]["event"] == "navigated" and out[0]["by"]["kind"] == "page"


def test_popup_opened_by_the_page_after_the_click_on_its_opener() -> None:
    c = Causes()
    c.known("A", "http://a/")
    c.acting("A", 12, "Input.dispatchMouseEvent", 1.0)
    opened = c.created("P", "", "A", 1.1)
    assert opened[0]["by"] == {"kind": "page", "after": 12}
    c.acting("P", 15, "Emulation.setFocusEmulationEnabled", 1.2)  # a client sets up the new tab
    assert c.navigated("P", "http://a/popup", 1.3)[0]["by"] == {"kind": "page", "after": 12}


def test_close_by_command_page_exit_and_stop() -> None:
    c = Causes()
    for tab in ("A", "B", "C"):
        c.known(tab, f"http://{tab}/")
    c.sent(cmd(20, "Target.closeTarget", "A"))
    assert c.destroyed("A", 1.0) == [
        {"event": "closed", "id": "A", "url": "http://A/", "by": by(20)}
    ]
    c.acting("B", 21, "Runtime.evaluate", 1.5)  # window.close()
    assert c.destroyed("B", 1.6)[0]["by"] == {"kind": "page", "after": 21}
    assert c.ended("exit") == [
        {"event": "closed", "id": "C", "url": "http://C/", "by": {"kind": "exit"}}
    ]
    assert c.ended("stop") == []


def test_another_users_script_is_its_own_cause() -> None:
    """A script call credits the input just before it only when the same user
    sent both: bob's click and alice's script a moment later are apart."""
    c = Causes()
    c.known("A", "http://a/")
    c.acting("A", 47, "Input.dispatchMouseEvent", 1.0, "bob")
    c.acting("A", 49, "Runtime.evaluate", 1.2, "alice")
    assert c.navigated("A", "http://a/by-alice", 1.3)[0]["by"] == {"kind": "page", "after": 49}
    c.acting("A", 50, "Input.dispatchMouseEvent", 2.0, "alice")
    c.acting("A", 51, "Runtime.callFunctionOn", 2.1, "alice")
    assert c.navigated("A", "http://a/next", 2.2)[0]["by"] == {"kind": "page", "after": 50}


def test_disposing_a_context_closes_its_tabs_by_that_command() -> None:
    c = Causes()
    c.known("A", "http://a/", context="C1")
    c.known("B", "http://b/", context="C1")
    c.known("D", "http://d/", context="C0")
    c.acting("A", 39, "Input.dispatchMouseEvent", 0.5, "bob")
    dispose = TabCommand(41, "Target.disposeBrowserContext", None, by(41), context="C1")
    c.sent(dispose)
    assert c.destroyed("A", 1.0)[0]["by"] == by(41)
    c.answered(41, True, None, 1.1)
    assert c.destroyed("B", 1.2)[0]["by"] == by(41)
    assert c.destroyed("D", 1.3)[0]["by"] == {"kind": "page", "after": None}


def test_a_navigation_is_the_navigate_sent_to_its_url() -> None:
    """Bob's navigate, held up, and alice's after it: the URL that comes is
    alice's, and so is the credit (the earlier one is not taken first)."""
    c = Causes()
    c.known("A", "http://a/")
    c.navigated("A", "http://a/", 0.1)
    c.sent(TabCommand(262, "Page.navigate", "A", by(262), url="https://slow.test/bob"))
    c.sent(TabCommand(264, "Page.navigate", "A", by(264), url="https://evil.test/alice"))
    assert c.navigated("A", "https://evil.test/alice", 1.0)[0]["by"] == by(264)
    # A redirect: no URL matches, the latest navigate in flight is credited.
    c.sent(TabCommand(270, "Page.navigate", "A", by(270), url="http://x.test/"))
    assert c.navigated("A", "https://x.test/login", 2.0)[0]["by"] == by(270)


def test_a_close_of_another_target_takes_no_tabs_close() -> None:
    """A close sent for a worker (or any id that is no tab) is not the cause
    of a popup that closes itself a moment later; a failed close causes
    nothing; a failed dispose closes nothing. (Tab-type ids are refused.)"""
    c = Causes()
    for tab in ("P", "F", "X"):
        c.known(tab, f"http://{tab}/", context="C1")
    c.acting("P", 7, "Input.dispatchMouseEvent", 0.5, "bob")
    c.sent(cmd(115, "Target.closeTarget", "WORKER1"))
    c.answered(115, True, None, 0.9)
    assert c.destroyed("P", 3.0)[0]["by"] == {"kind": "page", "after": 7}
    c.sent(cmd(120, "Target.closeTarget", "F"))
    c.answered(120, False, None, 4.0)
    assert c.destroyed("F", 4.1)[0]["by"]["kind"] == "page"
    c.sent(TabCommand(121, "Target.disposeBrowserContext", None, by(121), context="C1"))
    c.answered(121, False, None, 5.0)
    assert c.destroyed("X", 5.1)[0]["by"]["kind"] == "page"


def test_a_tab_with_no_opener_follows_the_front_tabs_latest_acting_entry() -> None:
    """A link dropped on a page opens a tab with no opener (4th red team):
    credited to the acting entry just before it on the tab in front, and to
    nothing when that entry came later (the event was held) or on another tab."""
    c = Causes()
    c.known("A", "http://a/")
    c.known("B", "http://b/")
    c.front.to_front("A")
    c.acting("A", 302, "Input.dispatchDragEvent", 1.0, "alice")
    assert c.created("N", "http://dropped/", None, 1.3)[0]["by"] == {"kind": "page", "after": 302}
    assert c.created("M", "http://later/", None, 9.0)[0]["by"] == {"kind": "page", "after": None}
    c.front.to_front("A")
    c.acting("B", 400, "Input.dispatchMouseEvent", 10.0, "alice")  # a background tab
    assert c.created("Q", "http://q/", None, 10.2)[0]["by"] == {"kind": "page", "after": None}
    # Held behind an open in flight, then an action after it: not its cause.
    c.front.to_front("A")
    c.sent(cmd(500, "Target.createTarget", None))
    assert c.created("R", "http://r/", None, 20.0) == []
    c.acting("A", 501, "Input.dispatchMouseEvent", 20.5, "bob")
    out = c.answered(500, True, "S", 20.6)
    assert {
        "event": "opened",
        "id": "R",
        "url": "http://r/",
        "by": {"kind": "page", "after": None},
    } in out


def test_a_redirect_is_credited_to_its_own_navigate() -> None:
    """Navigate #10 redirects after #12 was sent: each keeps its own (a review
    found the latest-first rule swapping them)."""
    c = Causes()
    c.known("A", "http://a/")
    c.navigated("A", "http://a/", 0.1)
    c.sent(TabCommand(10, "Page.navigate", "A", by(10), url="http://x.test/"))
    c.answered(10, True, None, 1.0)
    c.sent(TabCommand(12, "Page.navigate", "A", by(12), url="https://y.test/"))
    assert c.navigated("A", "https://x.test/login", 1.1)[0]["by"] == by(10)
    assert c.navigated("A", "https://y.test/", 1.2)[0]["by"] == by(12)


def test_a_navigate_that_went_nowhere_takes_no_later_navigation() -> None:
    """Alice's navigate answered 1.5 s ago (a frame's, a download's) did not
    take bob's click to another host (6th red team)."""
    c = Causes()
    c.known("A", "http://a/")
    c.navigated("A", "http://a/", 0.1)
    c.sent(TabCommand(231, "Page.navigate", "A", by(231), url="http://a/?alice"))
    c.answered(231, True, None, 1.0)
    c.acting("A", 233, "Input.dispatchMouseEvent", 2.4, "bob")
    out = c.navigated("A", "http://localhost/other?bob-clicked", 2.5)
    assert out[0]["by"] == {"kind": "page", "after": 233}


def test_a_service_workers_script_acts_on_the_tabs_it_serves_only() -> None:
    """A worker's acting command counts on its context's tabs of its origin:
    Alice's act on her own worker was the latest acting entry of Bob's tabs
    in another scope (4th red team: 3 of 3 of his navigations credited to her)."""
    c = Causes()
    c.known("A", "http://a.test/", context="CA")  # alice's tab, the worker's origin
    c.known("A2", "http://b.test/", context="CA")  # alice's, another origin
    c.known("B", "http://a.test/x", context="CB")  # bob's: the same origin, his scope
    c.acting("A2", 190, "Input.dispatchMouseEvent", 1.0, "alice")
    c.acting("B", 195, "Input.dispatchMouseEvent", 1.0, "bob")
    c.acting_served(Served("CA", "http://a.test"), 198, "Runtime.evaluate", 1.5, "alice")
    assert c.navigated("A", "http://a.test/other", 1.6)[0]["by"] == {"kind": "page", "after": 198}
    assert c.navigated("B", "http://a.test/y", 1.6)[0]["by"] == {"kind": "page", "after": 195}
    assert c.navigated("A2", "http://b.test/y", 1.6)[0]["by"] == {"kind": "page", "after": 190}
    # A worker whose context or origin is not known serves no tab.
    c.acting_served(Served(None, "http://a.test"), 199, "Runtime.evaluate", 2.0, "alice")
    c.acting_served(Served("CA", ""), 200, "Runtime.evaluate", 2.0, "alice")
    assert c.navigated("A", "http://a.test/3", 2.1)[0]["by"] == {"kind": "page", "after": 198}


def test_a_shared_scopes_worker_credits_its_sender_on_anothers_tab() -> None:
    """In one scope, Alice's script on the worker serving Bob's tab is the
    latest acting entry there: the navigation it makes is after hers."""
    c = Causes()
    c.known("B", "http://a.test:8000/page", context="C")
    c.acting("B", 10, "Input.dispatchMouseEvent", 1.0, "bob")
    c.acting_served(Served("C", "http://a.test:8000"), 11, "Runtime.evaluate", 1.2, "alice")
    assert c.navigated("B", "http://a.test:8000/n", 1.3)[0]["by"] == {"kind": "page", "after": 11}


def test_an_origin_is_read_as_chromium_writes_it() -> None:
    assert origin("http://A.test:80/x?y") == "http://a.test"
    assert origin("https://a.test:8443/sw.js") == "https://a.test:8443"
    assert origin("blob:https://a.test/uuid") == "https://a.test"
    assert origin("http://[::1]:9/") == "http://[::1]:9"
    for none in ("about:blank", "data:text/html,x", "file:///x", "http://a:bad/", ""):
        assert origin(none) == ""


def test_agentenv_cause_and_stale_commands_forgotten() -> None:
    c = Causes()
    c.known("A", "http://a/")
    c.sent(TabCommand(30, "Page.navigate", "A", {"kind": "agentenv"}))
    c.answered(30, True, None, 1.0)
    assert c.navigated("A", "http://a/2", 1.1)[0]["by"] == {"kind": "agentenv"}
    c.sent(cmd(31, "Page.navigate", "A"))
    c.answered(31, True, None, 2.0)
    c.tick(2.0 + CLAIM_WINDOW_S + 0.1)
    assert 31 not in c.commands


def test_the_front_tab_is_kept_from_commands() -> None:
    c = Causes()
    for tab in ("A", "B"):
        c.known(tab, f"http://{tab}/")
    c.front.to_front("B")
    assert c.front.active == "B"
    c.sent(TabCommand(1, "Target.createTarget", None, by(1), background=True))
    c.created("C", "about:blank", None, 1.0)
    c.answered(1, True, "C", 1.1)
    assert c.front.active == "B"  # opened behind
    c.sent(TabCommand(2, "Target.createTarget", None, by(2)))
    c.answered(2, True, "D", 2.0)
    c.created("D", "about:blank", None, 2.1)  # the answer came first
    assert c.front.active == "D"
    c.created("P", "", "D", 3.0)  # a popup comes to the front
    assert c.front.active == "P"
    c.sent(cmd(4, "Target.activateTarget", "C"))
    assert c.front.active == "P"  # not before it is answered
    c.answered(4, True, None, 4.0)
    assert c.front.active == "C"
    c.destroyed("C", 5.0)
    assert c.front.active == "P" and c.front.order == ["P", "D", "B", "A"]
    c.sent(cmd(6, "Target.activateTarget", "A"))
    c.answered(6, False, None, 6.0)
    assert c.front.active == "P"  # a failed activation changes nothing


def test_a_reload_or_a_same_url_navigation_is_written_when_answered() -> None:
    c = Causes()
    c.known("A", "http://a/page")
    c.sent(cmd(3, "Page.reload", "A"))
    assert c.answered(3, True, None, 1.0) == [
        {"event": "navigated", "id": "A", "url": "http://a/page", "by": by(3)}
    ]
    same = TabCommand(4, "Page.navigate", "A", by(4), url="HTTP://A/page")
    c.sent(same)
    assert c.answered(4, True, None, 2.0)[0]["by"] == by(4)
    elsewhere = TabCommand(5, "Page.navigate", "A", by(5), url="http://a/other")
    c.sent(elsewhere)
    assert c.answered(5, True, None, 3.0) == []  # its URL change will tell
    assert c.navigated("A", "http://a/other", 3.1)[0]["by"] == by(5)
    c.sent(cmd(6, "Page.reload", "A"))
    assert c.answered(6, False, None, 4.0) == []  # a failed reload: nothing


def test_a_loading_mark_nobody_clears_goes_stale() -> None:
    from agentenv.relay.causes import Causes
    from agentenv.relay.front import LOADING_STALE_S

    causes = Causes()
    causes.known("T1", "https://a.test/")
    causes.front.loading_changed("T1", True, 100.0)
    causes.front.loading_changed("NOT-A-TAB", True, 100.0)
    assert causes.front.loading_now(101.0) == ["T1"]
    assert causes.front.loading_now(100.0 + LOADING_STALE_S + 0.1) == []
    causes.front.loading_changed("T1", True, 200.0)
    causes.front.loading_changed("T1", False, 200.5)
    assert causes.front.loading_now(200.6) == []


def test_a_connection_knows_the_tabs_a_worker_serves() -> None:
    """A worker's session, and a worker's own page endpoint, name the worker's
    context and origin (the watcher's); a page's session names none."""
    from agentenv.access import Identity
    from agentenv.relay import core
    from agentenv.relay.client_state import ClientState

    state = ClientState(7, Identity("alice"))
    kinds = {"T": ("page", "http://a.test/"), "W": ("service_worker", "http://a.test:81/sw.js")}
    for target, (kind, url) in kinds.items():
        state.known.learn(TargetSeen(target, kind, url, "C"))
    for session, target, kind in (("ST", "T", "page"), ("SW", "W", "service_worker")):
        info = {"targetId": target, "type": kind, "url": kinds[target][1]}
        params = {"sessionId": session, "targetInfo": info}
        core.from_upstream(
            state, json.dumps({"method": "Target.attachedToTarget", "params": params})
        )
    assert state.served("SW") == Served("C", "http://a.test:81")
    assert state.served("ST") is None and state.served(None) is None
    state.page, state.page_worker = "W", "W"
    assert state.served(None) == Served("C", "http://a.test:81")
