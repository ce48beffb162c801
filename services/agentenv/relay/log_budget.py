"""Each user's share of the action log (issue 22; docs/fair-shares.md). No I/O.

A user past ``AGENTENV_LOG_USER_MAX_BYTES`` in all, or past
``AGENTENV_LOG_USER_BYTES_PER_MINUTE`` this minute (of the writer's clock),
has their commands and actions refused with rule ``log-budget``; everyone
else's go on. The bytes are the writer's count of each user's action lines
(:attr:`~agentenv.log.writer.LogWriter.spent`), and of the tab lines their
share pays for (:func:`tab_share`). The computer's own lines (``agentenv``)
have no budget. A refusal is on the record once a minute per user, with how
many were refused since the last such line.

A page's own tab lines (a page navigating itself, opening or closing tabs)
are not written once the share that pays for them is spent: they are
counted, and one line a minute (op ``tabs/counted``) says how many, of which
tabs (issue 40: a page moving itself went on filling the log after its
agent's commands were refused, until every user was). The pages go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentenv.log.lines import TABS_COUNTED
from agentenv.log.writer import LogWriter
from agentenv.settings import AGENTENV_USER

__all__ = ["TABS_LISTED", "LogBudget", "tab_share"]

#: The tabs a ``tabs/counted`` line names, at most (the count is whole).
TABS_LISTED = 16


def tab_share(
    by: Mapping[str, Any], scope: str | None, users: Sequence[str], payer: str | None
) -> tuple[str | None, bool]:
    """Whose share of the log a tab line counts against (None: the
    computer's own), and whether it is the page's own doing (which is not
    written once that share is spent). ``users``: the users of the tab's
    scope; ``payer``: the latest agent that acted in the tab (a popup: its
    opener's; :meth:`agentenv.relay.causes.KnownTab.pays`).

    - A command's: its sender's. It was let in under their share: it is
      always written.
    - The computer's own (``agentenv``), Chromium's exit, the computer's
      stop: no one's.
    - The page's own: the scope's user, in a scope of one user; in a scope
      several users share, the latest agent that acted in the tab; with none
      (no agent ever acted in it), the scope's tabs have a share of their
      own, ``scope:<name>`` (``scope:`` on a computer of one scope), as large
      as a user's.
    """
    kind = by.get("kind")
    if kind == "command":
        who = by.get("who")
        return (who if isinstance(who, str) and who != AGENTENV_USER else None), False
    if kind != "page":
        return None, False
    if len(users) == 1:
        return users[0], True
    return payer or f"scope:{scope or ''}", True


@dataclass
class _Counted:
    """A share's page tab events not written since its last ``tabs/counted`` line."""

    scope: str | None
    count: int = 0
    tabs: list[str] = field(default_factory=list)
    minute: int = -1  # of its last line


@dataclass
class LogBudget:
    """The budgets (0: none), and the refusals not yet on the record."""

    max_bytes: int = 0
    bytes_per_minute: int = 0
    #: user -> refusals since their last ``log-budget`` line, and its minute.
    _over: dict[str, int] = field(default_factory=dict)
    _over_minute: dict[str, int] = field(default_factory=dict)
    #: share -> its page tab events not written, not yet on the record.
    _tabs: dict[str, _Counted] = field(default_factory=dict)

    def over(self, writer: LogWriter, who: str) -> str | None:
        """Why ``who`` may write no more to the log now (None: they may)."""
        if who == AGENTENV_USER:
            return None
        if self.max_bytes and writer.spent.get(who, 0) >= self.max_bytes:
            return (
                f"blocked by agentenv guard log-budget: {who[:64]}'s entries reached their "
                f"share of the action log (AGENTENV_LOG_USER_MAX_BYTES={self.max_bytes}); "
                "nothing more is done for them on this computer: start a fresh one"
            )
        this_minute = writer.minute == int(writer.monotonic()) // 60
        if (
            self.bytes_per_minute
            and this_minute
            and writer.spent_this_minute(who) >= self.bytes_per_minute
        ):
            return (
                f"blocked by agentenv guard log-budget: {who[:64]}'s entries reached "
                f"{self.bytes_per_minute} bytes this minute "
                "(AGENTENV_LOG_USER_BYTES_PER_MINUTE): retry in a minute, and send less"
            )
        return None

    def to_tell(self, who: str, minute: int) -> int | None:
        """One more refusal of ``who``'s: how many to put on the record now
        (the first in ``minute``), else None (counted for the next line)."""
        self._over[who] = self._over.get(who, 0) + 1
        if self._over_minute.get(who) == minute:
            return None
        self._over_minute[who] = minute
        told, self._over[who] = self._over[who], 0
        return told

    def tab_counted(
        self, share: str, tab: str, scope: str | None, minute: int
    ) -> dict[str, Any] | None:
        """A page's tab event not written (``share`` is spent): the
        ``tabs/counted`` line to write now (the first in ``minute``), else
        None (it is counted for the next)."""
        counted = self._tabs.get(share)
        if counted is None:
            counted = self._tabs[share] = _Counted(scope)
        counted.count += 1
        if tab not in counted.tabs and len(counted.tabs) < TABS_LISTED:
            counted.tabs.append(tab)
        if counted.minute == minute:
            return None
        return self._told(share, counted, minute)

    def tabs_due(self, minute: int) -> list[dict[str, Any]]:
        """The ``tabs/counted`` lines of events counted in an earlier minute
        and not yet on the record (asked once a second)."""
        return [
            self._told(share, counted, minute)
            for share, counted in self._tabs.items()
            if counted.count and counted.minute != minute
        ]

    def _told(self, share: str, counted: _Counted, minute: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "via": "agentenv",
            "who": AGENTENV_USER,
            "op": TABS_COUNTED,
            "acts": "reading",
            "ok": False,
            "error": (
                f"counted by agentenv guard log-budget: {counted.count} tab events of pages "
                f"whose lines {share[:64]}'s share of the action log pays for were not "
                "written, that share being spent (AGENTENV_LOG_USER_MAX_BYTES, "
                "AGENTENV_LOG_USER_BYTES_PER_MINUTE); the pages go on, and their events are "
                "counted here once a minute"
            ),
            "guard": {"rule": "log-budget", "action": "counted"},
            "share": share,
            "count": counted.count,
            "tabs": counted.tabs,
        }
        if counted.scope is not None:
            body["scope"] = counted.scope
        counted.count, counted.tabs, counted.minute = 0, [], minute
        return body
