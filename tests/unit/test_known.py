"""What the relay knows of Chromium's targets changes only by facts learned
(relay/known.py, issue 42): every connection's rules read it, no callback
into the watcher."""

from __future__ import annotations

from agentenv.relay.known import Gone, InContext, Known, Lost, PageOfTab, TargetSeen
from tests.support.known import known


def test_a_frame_belongs_to_its_tab_through_nested_parents() -> None:
    facts = Known()
    facts.learn(TargetSeen("T", "page", "https://a.test/", "C"))
    facts.learn(TargetSeen("F1", "iframe", "https://b.test/", "C", parent="T"))
    facts.learn(TargetSeen("F2", "iframe", "https://c.test/", "C", parent="F1"))
    assert facts.tab_of("F2") == "T" and facts.tab_of("T") == "T"
    assert facts.tab_of("unknown") == "unknown"
    assert facts.target("F1") == ("iframe", "https://b.test/")
    assert facts.context_of("F2") == "C"
    # The browser's own UI is no tab: a chrome:// page's frame is its own.
    facts.learn(TargetSeen("UI", "page", "chrome://omnibox-popup/"))
    facts.learn(TargetSeen("UF", "iframe", "chrome://x/", parent="UI"))
    assert facts.tab_of("UF") == "UF"


def test_a_parent_loop_ends() -> None:
    facts = Known()
    facts.learn(TargetSeen("A", "iframe", "https://a.test/", parent="B"))
    facts.learn(TargetSeen("B", "iframe", "https://b.test/", parent="A"))
    assert facts.tab_of("A") == "A"


def test_gone_and_lost_forget() -> None:
    facts = Known()
    facts.learn(TargetSeen("TAB", "tab", "about:blank", "C"))
    facts.learn(PageOfTab("TAB", "PAGE"))
    facts.learn(InContext("OPENED", "C2"))
    assert facts.tab_page("TAB") == "PAGE" and facts.context_of("OPENED") == "C2"
    facts.learn(Gone("TAB"))
    assert facts.tab_page("TAB") is None and facts.target("TAB") is None
    assert facts.context_of("TAB") is None and facts.context_of("OPENED") == "C2"
    facts.learn(Lost())
    assert facts.context_of("OPENED") is None and dict(facts.targets) == {}


def test_a_warm_context_is_withheld_and_nothing_else() -> None:
    assert not Known().withheld("C")
    facts = known({"T": "WARM"}, withheld=lambda context: context == "WARM")
    assert facts.withheld(facts.context_of("T")) and not facts.withheld("OTHER")
    assert not facts.withheld(None)
