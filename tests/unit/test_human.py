"""A person on the record (issue 44, first slice): the ``role=human`` users,
their one door (the live view), ``via: human``, and the live view's inputs as
the pixel ops an agent calls. No I/O."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from agentenv.access import AccessDenied, Identity, check_origin, identify
from agentenv.app.app_errors import OpError
from agentenv.app.caller import caller_of
from agentenv.app.live_doors import HOLD_S, LIVE_OPS, live_op, take_control
from agentenv.app.live_page import live_page
from agentenv.app.optable import OPS
from agentenv.harness.words import words
from agentenv.protocol.browser import (
    HumanAnswer,
    InputButton,
    InputScroll,
    InputType,
    RequestHuman,
    TabRef,
)
from agentenv.protocol.control import BeginAction
from agentenv.protocol.log import read_lines
from agentenv.settings import Settings, SettingsError, load, parse_humans, parse_scopes, parse_users

PEOPLE = "alice:a-tok:shop, carol:c-tok:shop:role=human, dave:to:ken:ops, erin:e-tok:role=human"


def test_a_role_is_the_last_field_and_changes_no_other() -> None:
    assert parse_users(PEOPLE) == {
        "alice": "a-tok",
        "carol": "c-tok",
        "dave": "to:ken",
        "erin": "e-tok",
    }
    assert parse_scopes(PEOPLE) == {"alice": "shop", "carol": "shop", "dave": "ops", "erin": "erin"}
    assert parse_humans(PEOPLE) == {"carol", "erin"}
    assert parse_humans("alice:a-tok:shop:role=agent") == frozenset()
    settings = load({"AGENTENV_USERS": PEOPLE})
    assert settings.humans == {"carol", "erin"}


def test_an_unknown_role_is_refused_without_the_token() -> None:
    with pytest.raises(SettingsError) as caught:
        parse_users("carol:s3cret-tok:shop:role=boss")
    assert "role=agent or role=human" in str(caught.value)
    assert "s3cret" not in str(caught.value)


SETTINGS = Settings(
    users={"alice": "a-secret-1", "carol": "c-secret-2"},
    scopes={"alice": "shop", "carol": "shop"},
    humans=frozenset({"carol"}),
    control_token="ctl-3",
)


def test_a_persons_token_opens_the_live_view_only() -> None:
    assert identify(SETTINGS, "c-secret-2", None, live=True) == Identity("carol", human=True)
    with pytest.raises(AccessDenied) as caught:
        identify(SETTINGS, "c-secret-2", None)  # the relay, the ops, /mcp
    assert caught.value.status == 403 and "live view only" in caught.value.message
    assert "c-secret" not in caught.value.message
    # An agent's token and the control token are what they were, at every door.
    assert identify(SETTINGS, "a-secret-1", None, live=True) == Identity("alice")
    assert identify(SETTINGS, "a-secret-1", None) == Identity("alice")
    assert identify(SETTINGS, "ctl-3", None, live=True).control


def test_a_person_is_via_human_whatever_the_headers() -> None:
    person = Identity("carol", human=True)
    assert caller_of(person, "agentenv", None, users=True).via == "human"
    caller = caller_of(person, None, None, users=True)
    assert (caller.via, caller.who, caller.role, caller.own) == ("human", "carol", None, False)
    assert caller_of(Identity("alice"), None, None, users=True).via == "api"
    BeginAction(via="human", who="carol", op="input/type")  # the relay takes it


def test_each_live_input_is_an_agents_pixel_op() -> None:
    assert set(LIVE_OPS.values()) - set(OPS) == {"human/answer"}  # the rest are the ops
    op, body = live_op({"kind": "down", "x": 10, "y": 20, "button": "left", "clicks": 2})
    assert op == "input/down" and body == InputButton(x=10, y=20, clicks=2)
    op, body = live_op({"kind": "wheel", "x": 1, "y": 2, "dx": 0, "dy": 120})
    assert op == "input/scroll" and body == InputScroll(x=1, y=2, dy=120)
    assert live_op({"kind": "text", "text": "hi"}) == ("input/type", InputType(text="hi"))
    assert live_op({"kind": "tab", "id": "T1"}) == ("tabs/activate", TabRef(id="T1"))
    assert live_op({"kind": "key", "keys": "ctrl+a"})[0] == "input/key"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"kind": "eval", "expression": "1"},
        {"kind": ["move"]},
        {"kind": "move", "x": -1, "y": 0},
        {"kind": "move", "x": 1, "y": 1, "extra": True},
        {"kind": "text", "text": "x", "scope": "bob"},
        {"kind": "down", "x": 1, "y": 1, "clicks": 9},
    ],
)
def test_a_bad_live_input_is_400(body: dict[str, object]) -> None:
    with pytest.raises(OpError) as caught:
        live_op(body)
    assert caught.value.status == 400


def test_the_view_takes_its_own_origin_only_on_its_doors() -> None:
    settings = Settings(users={"alice": "a"})
    check_origin(settings, "http://10.0.0.5:8080", own_host="10.0.0.5:8080")
    for other, host in (("http://evil.example", "10.0.0.5:8080"), ("http://10.0.0.5:8080", None)):
        with pytest.raises(AccessDenied):
            check_origin(settings, other, own_host=host)
    with pytest.raises(AccessDenied):  # another port is another origin
        check_origin(settings, "http://10.0.0.5:9222", own_host="10.0.0.5:8080")


def test_the_page_drives_only_for_a_person() -> None:
    assert "const DRIVES = true;" in live_page(drives=True)
    watching = live_page(drives=False)
    assert "const DRIVES = false;" in watching
    # The watched page is drawn, never embedded; its titles are text.
    assert "<iframe" not in watching and "innerHTML" not in watching
    assert "default-src 'none'" in watching


def test_the_words_name_a_press_and_a_release() -> None:
    def line(seq: int, op: str) -> dict[str, object]:
        action = {
            "via": "api",
            "who": "alice",
            "op": op,
            "acts": "acting",
            "args": {"x": 5, "y": 6},
        }
        return {"seq": seq, "at": "2026-12-06T05:00:00.000Z", "prev": "x", "action": action}

    data = b"\n".join(orjson.dumps(line(n, op)) for n, op in enumerate(("input/down", "input/up")))
    assert words(read_lines(data)) == ["press the mouse at (5, 6)", "release the mouse at (5, 6)"]
    # A person's acts are no agent's: the judge's words are the agent's alone.
    person = orjson.dumps(
        {
            **line(1, "input/down"),
            "action": {"via": "human", "who": "carol", "op": "input/down", "acts": "acting"},
        }
    )
    assert words(read_lines(person)) == []


def test_a_persons_word_is_a_live_input_and_a_request_is_bounded() -> None:
    assert live_op({"kind": "answer", "word": "done"}) == ("human/answer", HumanAnswer(word="done"))
    _, body = live_op({"kind": "answer", "word": "cannot", "note": "no code came"})
    assert body == HumanAnswer(word="cannot", note="no code came")
    for bad in ({"kind": "answer", "word": "maybe"}, {"kind": "answer"}):
        with pytest.raises(OpError):
            live_op(bad)
    assert RequestHuman(reason="a CAPTCHA").timeout_s == 300
    for fields in (
        {"reason": ""},
        {"reason": "x", "timeout_s": 0},
        {"reason": "x", "timeout_s": 3601},
    ):
        with pytest.raises(ValidationError):
            RequestHuman.model_validate(fields)


def test_one_person_holds_the_view_until_a_while_after_their_last_input() -> None:
    held = take_control(None, "carol", 100.0)
    assert held == ("carol", 100.0 + HOLD_S)
    assert take_control(held, "carol", 110.0) == ("carol", 110.0 + HOLD_S)  # theirs again
    with pytest.raises(OpError) as caught:
        take_control(held, "dora", 100.0 + HOLD_S - 1)
    assert caught.value.status == 409 and "carol has control" in caught.value.message
    assert take_control(held, "dora", 100.0 + HOLD_S) == ("dora", 100.0 + 2 * HOLD_S)
