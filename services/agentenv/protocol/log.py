"""The action log's lines, and ``log {after, limit}`` → ``{lines, last}``
(docs/spec.md sections 1 and 3).

A line is one of the kinds of :data:`LogLine`: ``{"seq", "at", "prev", <kind>:
body}`` (``prev``: the hash chain, :mod:`agentenv.protocol.chain`).
The bodies are ``TypedDict``s, not pydantic models: the relay writes lines on
every command and the readers (the recorder, the exports, the viewer) parse
thousands at a time, so a line stays the plain dict ``orjson`` gives, typed
for ``mypy`` and read with :func:`parse_line`. Bodies are open (a line may
carry fields a reader does not name: SPEC adds them over time), so
:class:`LogPage` keeps every field it is given.

What counts as an agent's own act (bursts, the words a judge reads, the
viewer, the Mind2Web export) is :func:`agent_act`, here and only here.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, cast

import orjson
from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

__all__ = [
    "ACTING",
    "AGENT_VIAS",
    "LINE_KINDS",
    "PERSON_VIA",
    "READING",
    "WHERE_METHODS",
    "ActionBody",
    "ActionLine",
    "Acts",
    "AuthBody",
    "AuthLine",
    "BreakBody",
    "BreakLine",
    "By",
    "LineKind",
    "LogLine",
    "LogPage",
    "LogRequest",
    "LostLine",
    "OutcomeLine",
    "ResetLine",
    "TabBody",
    "TabLine",
    "action_of",
    "agent_act",
    "is_agent_act",
    "page_bytes",
    "parse_line",
    "person_act",
    "read_lines",
    "says_where",
    "scope_of",
    "tab_of",
]

#: An entry's mark (docs/spec.md section 1, "Acting or reading"): ``reading``
#: only what is shown unable to change any page, its pixels, its network
#: or its storage; everything else ``acting``.
Acts = Literal["acting", "reading"]
ACTING: Acts = "acting"
READING: Acts = "reading"

LineKind = Literal["action", "tab", "reset", "outcome", "lost", "break", "auth"]
LINE_KINDS: tuple[LineKind, ...] = ("action", "tab", "reset", "outcome", "lost", "break", "auth")

#: The ways in an agent acts through (``agentenv`` is the computer's own;
#: ``human``, a person's acts through the live view, are no agent's).
AGENT_VIAS = ("cdp", "mcp", "api")
#: The ``via`` of a person's acts through the live view.
PERSON_VIA = "human"
#: CDP commands that say where an agent acts, with every ``Input.*``: moving
#: between pages and tabs (a client's set-up, scripts and emulation, which it
#: may send to every tab, do not). The video follows them, and a tool call's
#: entry takes their tab.
WHERE_METHODS = frozenset(
    {"Page.navigate", "Page.reload", "Page.navigateToHistoryEntry", "Page.bringToFront"}
    | {"Target.activateTarget", "Target.createTarget"}
)

_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class Guard(TypedDict):
    rule: str
    action: str


@with_config(_OPEN)
class ActionBody(TypedDict, total=False):
    """An ``action`` line's body (docs/spec.md section 1, ``action``)."""

    via: str  # cdp | mcp | api | human | agentenv
    who: str
    role: str
    conn: int
    method: str
    tool: str
    call: str | int  # a JSON-RPC id
    op: str
    acts: str  # acting | reading (Acts)
    tab: str | None
    url: str | None
    params: Any  # with secrets removed (a CDP command's params, as sent)
    args: Any
    ok: bool | None
    error: str | None
    guard: Guard
    within: int
    scope: str
    unfinished: bool
    target: Any  # what a press landed on, during a recording (its role and name)


@with_config(_OPEN)
class By(TypedDict, total=False):
    """A tab event's cause: ``kind`` is command, agentenv, page, exit or stop."""

    kind: str
    entry: int
    via: str
    who: str
    within: int
    after: int | None


@with_config(_OPEN)
class TabBody(TypedDict, total=False):
    event: str  # opened | navigated | closed
    id: str
    url: str
    by: By
    scope: str


@with_config(_OPEN)
class _Line(TypedDict):
    seq: int
    at: str
    prev: NotRequired[str]  # the hash of the line before (agentenv.protocol.chain)


class ActionLine(_Line):
    action: ActionBody


class TabLine(_Line):
    tab: TabBody


@with_config(_OPEN)
class ResetBody(TypedDict, total=False):
    reason: str


class ResetLine(_Line):
    reset: ResetBody


@with_config(_OPEN)
class OutcomeBody(TypedDict):
    entry: int
    ok: bool
    error: NotRequired[str]


class OutcomeLine(_Line):
    outcome: OutcomeBody


@with_config(_OPEN)
class LostBody(TypedDict):
    entry: int


class LostLine(_Line):
    lost: LostBody


@with_config(_OPEN)
class Torn(TypedDict):
    bytes: int
    hash: str


@with_config(_OPEN)
class BreakBody(TypedDict):
    """A restart after a crash (:mod:`agentenv.protocol.chain`): why, the
    numbers taken and never written (each also has its ``lost`` line), and the
    half-written last line moved to ``<file>.partial``."""

    why: str
    lost: list[int]
    torn: NotRequired[Torn]


#: ``break`` is a Python keyword: the line is declared in TypedDict's other form.
BreakLine = TypedDict(
    "BreakLine", {"seq": int, "at": str, "prev": NotRequired[str], "break": BreakBody}
)


@with_config(_OPEN)
class AuthBody(TypedDict, total=False):
    """A request refused for its token (:mod:`agentenv.log.auth`): ``door``,
    ``source``, ``path``, ``why`` and the names it ``claimed``; or a minute's
    count of those not written one by one from ``source`` (null: every other
    address), ``refused``, at ``doors``."""

    door: str  # cdp | op | mcp | live
    source: str | None
    path: str
    why: str  # no token | unknown token
    claimed: dict[str, str]
    refused: int
    doors: list[str]


class AuthLine(_Line):
    auth: AuthBody


LogLine = ActionLine | TabLine | ResetLine | OutcomeLine | LostLine | BreakLine | AuthLine


def parse_line(raw: bytes | str) -> LogLine:
    """One encoded line as its :data:`LogLine`.

    :class:`ValueError` when ``raw`` is not JSON, or not an object with an
    integer ``seq`` and one body of a known kind.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"a log line that is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("a log line that is not an object")
    seq = value.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ValueError("a log line without an integer seq")
    if sum(1 for kind in LINE_KINDS if isinstance(value.get(kind), dict)) != 1:
        raise ValueError(f"log line {seq} has no single body of {', '.join(LINE_KINDS)}")
    return cast(LogLine, value)


def action_of(line: LogLine | dict[str, Any]) -> ActionBody | None:
    """The body of an ``action`` line, else None."""
    action = line.get("action")
    return cast(ActionBody, action) if isinstance(action, dict) else None


def tab_of(line: LogLine | dict[str, Any]) -> TabBody | None:
    """The body of a ``tab`` line, else None."""
    tab = line.get("tab")
    return cast(TabBody, tab) if isinstance(tab, dict) else None


def read_lines(data: bytes | str) -> list[LogLine]:
    """The lines of a ``log.jsonl`` (a recording's slice, or the log itself),
    blank lines passed over; :class:`ValueError` names the first bad one."""
    raw = data.encode() if isinstance(data, str) else data
    return [parse_line(x) for x in raw.splitlines() if x.strip()]


def agent_act(line: LogLine | dict[str, Any]) -> ActionBody | None:
    """The action of a log line that is an agent's own act, else None: an
    acting entry, by an agent (not the computer's own, ``who``/``via:
    agentenv``), and not a command run within a tool call or op (that call's
    own entry stands for it). Bursts, the words a judge reads, the viewer and
    the exports all count these, and only these."""
    action = line.get("action")
    if not isinstance(action, dict) or action.get("acts") != "acting":
        return None
    if action.get("who") == "agentenv" or action.get("within") is not None:
        return None
    return cast(ActionBody, action) if action.get("via") in AGENT_VIAS else None


def person_act(line: LogLine | dict[str, Any]) -> ActionBody | None:
    """The action of a log line that is a person's own act through the live
    view (``via: human``, acting, not within another call), else None. A
    recording frames these as it frames an agent's (``kind: person``)."""
    action = line.get("action")
    if not isinstance(action, dict) or action.get("acts") != "acting":
        return None
    if action.get("within") is not None or action.get("via") != PERSON_VIA:
        return None
    return cast(ActionBody, action)


def says_where(method: str) -> bool:
    """Whether a CDP command says where its sender acts (:data:`WHERE_METHODS`)."""
    return method.startswith("Input.") or method in WHERE_METHODS


def is_agent_act(line: LogLine | dict[str, Any]) -> bool:
    """Whether ``line`` is an agent's own act (:func:`agent_act`)."""
    return agent_act(line) is not None


def scope_of(line: LogLine | dict[str, Any]) -> str | None:
    """The scope a log line is in: its action's or its tab event's (None: a
    line of the whole computer, such as a reset, or a computer of one scope)."""
    for kind in ("action", "tab"):
        body = line.get(kind)
        if isinstance(body, dict):
            found = body.get("scope")
            return found if isinstance(found, str) else None
    return None


class LogRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    after: int = Field(0, ge=0, description="return lines with seq greater than this")
    limit: int = Field(1000, ge=1, le=10000, description="at most this many lines")


class LogPage(BaseModel):
    """The ``log`` op's answer. The app server sends it as :func:`page_bytes`
    (the lines as the writer encoded them, not parsed again); a reader parses
    it with ``LogPage.model_validate_json``."""

    model_config = ConfigDict(extra="forbid")

    lines: list[LogLine]
    last: int


def page_bytes(lines: list[bytes], last: int) -> bytes:
    """A :class:`LogPage` from lines already encoded (each one JSON object,
    as the log's one writer wrote it, newline stripped)."""
    return b'{"lines":[' + b",".join(lines) + b'],"last":' + str(last).encode() + b"}"
