from __future__ import annotations

from agentenv.relay.password import (
    check_expression,
    drop_point,
    is_typing,
    verdict,
    withhold_typing,
)


def test_typing() -> None:
    assert is_typing("Input.insertText", {"text": "x"})
    assert is_typing("Input.imeSetComposition", {"text": "x"})
    assert is_typing("Input.dispatchKeyEvent", {"type": "keyDown", "text": "a"})
    assert is_typing("Input.dispatchKeyEvent", {"type": "keyUp", "key": "a"})
    assert not is_typing("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter"})
    assert not is_typing("Input.dispatchMouseEvent", {"type": "mousePressed"})
    assert not is_typing("Runtime.evaluate", {"expression": "x"})


def test_withhold_typing_keeps_no_trace() -> None:
    key = {"type": "keyDown", "key": "h", "code": "KeyH", "text": "h", "windowsVirtualKeyCode": 72}
    assert withhold_typing("Input.dispatchKeyEvent", key) == {
        "type": "keyDown",
        "text": {"withheld": "password", "length": 1},
    }
    assert withhold_typing("Input.insertText", {"text": "hunter2"}) == {
        "text": {"withheld": "password", "length": 7}
    }


def test_verdict() -> None:
    def answer(value: object) -> dict[str, object]:
        return {"id": 1, "result": {"result": {"type": "string", "value": value}}}

    assert verdict(answer("no")) == "no"
    assert verdict(answer("password")) == "password"
    assert verdict(answer("undecided")) == "undecided"
    assert verdict({"id": 1, "error": {"message": "x"}}) == "undecided"
    assert verdict(None) == "undecided"


def test_drops_of_text_are_typing_checked_at_the_drop_point() -> None:
    drop = {
        "type": "drop",
        "x": 120,
        "y": 275,
        "data": {"items": [{"mimeType": "text/plain", "data": "hunter2"}], "dragOperationsMask": 1},
    }
    assert is_typing("Input.dispatchDragEvent", drop)
    assert drop_point("Input.dispatchDragEvent", drop) == (120.0, 275.0)
    kept = withhold_typing("Input.dispatchDragEvent", drop)
    assert "hunter2" not in str(kept)
    assert kept["data"]["items"][0]["data"] == {"withheld": "password", "length": 7}
    files_only = {"type": "drop", "x": 1, "y": 1, "data": {"items": [], "files": ["/dl/a"]}}
    assert not is_typing("Input.dispatchDragEvent", files_only)
    assert drop_point("Input.insertText", {"text": "x"}) is None


def test_check_expressions() -> None:
    assert "activeElement" in check_expression()
    at = check_expression((1.5, 2))
    assert "elementFromPoint" in at and at.endswith("(1.5, 2.0)")
