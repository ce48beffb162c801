"""The MiniWoB++ tasks the tests and the bench play (docs/harness.md): the
15 the scripted oracle solves (tests/clients/browsergym_session.py's
``plan``) and 15 it gives up on at once, the documented sample of 30."""

from __future__ import annotations

#: The documented subset the scripted agent solves.
SOLVED = [
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-collapsible",
    "click-dialog",
    "click-link",
    "click-option",
    "click-tab",
    "click-test",
    "click-test-2",
    "click-widget",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "focus-text",
]
#: Tasks the scripted agent has no plan for: it ends each at once (reward 0),
#: and the env still resets, observes and scores.
GIVEN_UP = [
    "ascending-numbers",
    "bisect-angle",
    "book-flight",
    "buy-ticket",
    "choose-date",
    "choose-list",
    "circle-center",
    "click-color",
    "click-menu",
    "click-pie",
    "click-scroll-list",
    "click-shades",
    "click-shape",
    "copy-paste",
    "count-shape",
]
#: What ``agentenv run --browsergym miniwob`` plays in CI.
SAMPLE = SOLVED + GIVEN_UP
