"""What a connection's rules ask the relay to record, as frozen values.

A door reads a client's command (:mod:`agentenv.relay.connection`) and hands
the :class:`~agentenv.relay.logbook.Logbook` one :class:`Begin`: everything
the entry needs to know of the command, built in one place
(:func:`agentenv.relay.core.begin_of`) for every door that takes commands,
and for the computer's own commands (the watcher's, a warm scope's first
tab). Its answer, a refusal, or its loss ends it with one :class:`Ended`. No I/O.

An effect is a :class:`typing.NamedTuple`: immutable, typed, and built at
C speed. A frozen dataclass of the same eleven fields takes 1.2 µs to build
(each field set through ``object.__setattr__``), a NamedTuple 0.3 µs, and
one is built for every command on the record (``python -m bench log``,
docs/decisions.md "Effects are NamedTuples").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from agentenv.access import Identity
from agentenv.relay.causes import Served

__all__ = ["Begin", "Ended"]


class Begin(NamedTuple):
    """A CDP command's entry, about to begin (:meth:`Logbook.begin`)."""

    #: Who sent it (the control token's acts for the action it runs in).
    identity: Identity
    #: Its connection's number (0: the computer's own, the watcher's).
    conn: int
    #: The connection's ``AgentEnv-Tag``.
    tag: str | None
    method: str
    #: The params as sent (rewritten by the rules), redacted when written.
    params: Mapping[str, Any] | None
    #: The tab it acts on or reads (None: the browser's).
    tab: str | None
    #: Replaces the params of a typing command the password check did not
    #: clear (the text withheld), or of a credential fill (the value withheld).
    typed: dict[str, Any] | None = None
    #: A ``Page.navigate`` of a frame: it claims no navigation of its tab.
    frame_only: bool = False
    #: Sent to a service or shared worker: it acts on the tabs that worker serves.
    served: Served | None = None
    #: The scope its sender acts in (computers of two scopes or more).
    scope: str | None = None
    #: It reaches Chromium. False for a command refused, invalid or answered
    #: by the relay: on the record, but no tab event is its doing, so it is
    #: not the latest acting entry of any tab.
    sent: bool = True


class Ended(NamedTuple):
    """A CDP command's entry, ended (:meth:`Logbook.end`): it is written."""

    #: Its number (:meth:`Logbook.begin`).
    entry: int
    #: Chromium answered without an error (False: an error, a refusal, or
    #: no answer at all).
    ok: bool
    #: Why it failed, as the client was told (redacted and cut when written).
    error: str | None = None
    #: The guard's rule and action, on a refused command.
    guard: dict[str, str] | None = None
    #: ``Target.createTarget``: the tab it opened.
    opened: str | None = None
