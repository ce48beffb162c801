"""What the relay writes to the action log, for every path in.

:class:`Logbook` holds the relay's one :class:`~agentenv.log.writer.LogWriter`,
the tab book (:class:`~agentenv.relay.causes.Causes`) and the actions reported
with ``AgentEnv.beginAction`` that are still open. Connections call it as
their commands begin and end; the watcher calls it as Chromium reports tab
events. No socket I/O here: only the log file.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from agentenv.access import Identity
from agentenv.log.argpaths import restore_paths, withhold_path
from agentenv.log.lines import BROWSER_EXITED
from agentenv.log.redact import redact, redact_cut, redact_text
from agentenv.log.writer import LogWriter
from agentenv.metrics import RelayCounts
from agentenv.protocol.control import BeginAction, EndAction
from agentenv.protocol.log import ACTING, READING, ActionBody, Guard, says_where
from agentenv.relay.causes import TAB_METHODS, Causes, TabCommand
from agentenv.relay.commands import ACTING_WITH, METHOD_FACTS, acts, used_params
from agentenv.relay.effects import Begin, Ended
from agentenv.relay.log_budget import LogBudget, tab_share
from agentenv.relay.relay_errors import ControlRefused
from agentenv.settings import Settings

__all__ = ["Action", "ActionScope", "Logbook"]

#: Commands after which their tab is gone: no action is framed on it.
_GONE = frozenset({"Target.closeTarget", "Page.close"})
#: Pixel ops whose entry takes the element their press or typing landed on.
_NAMED_OPS = ("input/click", "input/down", "input/type")

log = logging.getLogger("agentenv.relay")


@dataclass(frozen=True)
class ActionScope:
    """The relay connections whose commands belong to an open action."""

    conns: frozenset[int] = frozenset()
    tags: frozenset[str] = frozenset()

    def covers(self, conn: int, tag: str | None) -> bool:
        return conn in self.conns or (tag is not None and tag in self.tags)


@dataclass
class Action:
    """An action reported by ``AgentEnv.beginAction``, open until its end."""

    entry: int
    via: str
    who: str
    owner: int  # the reporting connection
    scope: ActionScope
    tab: str | None = None
    #: Arg paths holding typed text, and their values until every check clears.
    typed: dict[str, Any] = field(default_factory=dict)
    cleared: bool = True  # no check said password (or could not decide)
    checked: bool = False  # at least one check ran
    #: Begun naming no tab (an MCP tool call: Playwright MCP picks its tab):
    #: its entry takes the tab (and URL) of its latest input or move between
    #: pages (``says_where``), else of its latest acting command; ``moved``: seen one.
    learns_tab: bool = False
    moved: bool = False


@dataclass
class Logbook:
    writer: LogWriter
    causes: Causes = field(default_factory=Causes)
    actions: dict[int, Action] = field(default_factory=dict)
    _unlogged: int = 0  # keys of unlogged commands count down from -1
    #: Open recordings (their id, and the recorder connection that began them):
    #: while one is open, a press is described by the element it lands on.
    recordings: dict[str, int] = field(default_factory=dict)
    _urls: dict[str, str] = field(default_factory=dict)  # URL -> redacted
    #: AGENTENV_LOG_MAX_BYTES: past it, agents' commands and actions are refused.
    max_bytes: int = Settings.log_max_bytes
    #: Each user's share of the log (AGENTENV_LOG_USER_MAX_BYTES, …_PER_MINUTE).
    budget: LogBudget = field(default_factory=LogBudget)
    #: The scope a browser context is (computers of two scopes or more), for
    #: tab lines: the watcher's.
    scope_of: Callable[[str | None], str | None] = field(default=lambda context: None)
    #: The users of a scope (None: a computer of one scope), whose share of
    #: the log its tabs' lines count against: the watcher's.
    users_of: Callable[[str | None], list[str]] = field(default=lambda scope: [])
    _tab_scopes: dict[str, str] = field(default_factory=dict)  # tab -> its scope
    #: The relay's counts for ``/metrics`` (the app's, under ``counts_key``).
    counts: RelayCounts = field(default_factory=RelayCounts)

    @property
    def full(self) -> bool:
        """The log is past its size limit: nothing more an agent asks is done
        (what is not written is not done); the computer's own bookkeeping and
        what already runs (answers, tab events) are still written."""
        return self.writer.size >= self.max_bytes

    def over_budget(self, who: str) -> str | None:
        """Why ``who`` may write no more to the log now (None: they may)."""
        return self.budget.over(self.writer, who)

    def log_refusal(self, who: str, conn: int, method: str) -> tuple[bool, str] | None:
        """Why an agent's command may not be written now, counted and on the
        record: ``(True, why)`` when the log is full, ``(False, why)`` when
        ``who``'s share of it is spent; None when it may. The proxy and the
        HTTP commands ask it alike."""
        if self.full:
            self.counts.log_full += 1
            return True, self.full_message()
        over = self.over_budget(who)
        if over is not None:
            self.budget_refused(who, conn, method, over)
            return False, over
        return None

    def budget_refused(self, who: str, conn: int, method: str, message: str) -> None:
        """A command refused for ``who``'s log budget: on the record once a
        minute (a line of the computer's own, which is never refused), with
        how many were refused since the last such line."""
        refused = self.budget.to_tell(who, int(self.writer.monotonic() // 60))
        if refused is not None:
            self.refused(who, conn, method, "log-budget", message, count=refused, refused=refused)

    def refused(
        self,
        who: str,
        conn: int,
        method: str | None,
        rule: str,
        error: str,
        action: str = "blocked",
        count: int = 1,
        **more: Any,
    ) -> None:
        """A guard's refusal that has no command entry of its own (the
        command was never read whole, or the line would cost its sender's
        spent budget): a line of the computer's own, never refused."""
        self.counts.refused_by(rule, count)
        fields: dict[str, Any] = {"via": "cdp", "who": who, "conn": conn}
        if method is not None:
            fields["method"] = method
        fields.update(
            acts=READING, ok=False, error=error, guard={"rule": rule, "action": action}, **more
        )
        self.writer.record("action", fields)

    def full_message(self) -> str:
        """The refusal of an agent's command or action while the log is full
        (rule ``log-full``: the app answers it 503, as the relay's own HTTP
        commands do, never as Chromium's)."""
        return (
            "refused by agentenv guard log-full: the action log is full "
            f"(AGENTENV_LOG_MAX_BYTES={self.max_bytes}): this computer takes no more commands "
            "from agents; end the run and start a fresh computer"
        )

    @property
    def monotonic(self) -> Callable[[], float]:
        """The writer's clock: a command's start and its tab's last act agree."""
        return self.writer.monotonic

    # -- CDP commands --------------------------------------------------------

    def within(self, conn: int, tag: str | None, identity: Identity | None = None) -> Action | None:
        """The latest open action whose scope covers this connection; for an
        agent's connection (``identity``), only one of that agent's: a tag it
        gave itself never puts its commands inside another's action."""
        who = identity.user if identity is not None and not identity.control else None
        found = None
        for action in self.actions.values():
            if action.scope.covers(conn, tag) and (who is None or action.who == who):
                found = action
        return found

    def begin(self, command: Begin) -> int:
        """Take an entry for a CDP command about to be sent (or refused, or
        answered by the relay: :attr:`Begin.sent`); its number."""
        # One unpacking, in Begin's field order (cheaper than eleven lookups).
        identity, conn, tag, method, params, tab, typed, frame_only, served, scope, sent = command
        mark, acting, tab_method, takes = METHOD_FACTS[method]
        if not acting and method in ACTING_WITH and params:
            mark = acts(method, params)
            acting = mark == ACTING
        if acting:
            self.counts.acting += 1
        else:
            self.counts.reading += 1
        action = self.within(conn, tag, identity) if self.actions else None
        if action is not None and identity.control:
            # The computer's connections act for the action they run in (a
            # Playwright MCP for an agent's tool call): its caller is who.
            identity = Identity(action.who, control=True)
        fields: ActionBody = {
            "via": "cdp",
            "who": identity.user,
            "conn": conn,
            "method": method,
            "acts": mark,
        }
        if scope is not None:
            fields["scope"] = scope
        if tab_method and method == "Target.createTarget":
            tab = None  # it takes the tab it opens, once answered
        if tab is not None:
            fields["tab"] = tab
            info = self.causes.tabs.get(tab)
            if info is not None:
                safe = info.logged_url
                if safe is None:
                    safe = info.logged_url = self._safe_url(info.url)
                fields["url"] = safe
        else:
            info = None
        if acting:
            # Redacted when the line is written, after the client's answer
            # (log.cdp_params.resolved: a (method, params) pair until then).
            if typed is None and params and takes is not None and not takes.issuperset(params):
                params = used_params(method, params)
            fields["params"] = typed if typed is not None else (method, params)
        if action is not None:
            fields["within"] = action.entry
            if acting and sent and action.learns_tab and tab is not None and method not in _GONE:
                self._acted_on(action, tab, fields.get("url"), says_where(method))
        writer = self.writer
        now = writer.monotonic()
        entry = writer.begin(fields, now)
        if acting and sent:
            if served is not None:
                self.causes.acting_served(served, entry, method, now, identity.user)
            elif info is not None:
                self.causes.acting_in(info, entry, method, now, identity.user)
        if tab_method and not frame_only and sent:
            self.causes.sent(
                self._command(entry, method, params, tab, self._by(entry, identity, action))
            )
        return entry

    @staticmethod
    def _command(
        key: int, method: str, params: Mapping[str, Any] | None, tab: str | None, by: dict[str, Any]
    ) -> TabCommand:
        target = tab
        if method in ("Target.closeTarget", "Target.activateTarget") and params:
            named = params.get("targetId")
            target = named if isinstance(named, str) else tab
        if method == "Target.createTarget":
            target = None
        background = bool(params and params.get("background") is True)
        url = params.get("url") if params and method == "Page.navigate" else None
        context = params.get("browserContextId") if params else None
        return TabCommand(
            key,
            method,
            target,
            by,
            background=background,
            url=url if isinstance(url, str) else None,
            context=context if isinstance(context, str) else None,
        )

    def _safe_url(self, url: str) -> str:
        """A tab's URL, redacted once per URL (most commands name the same few)."""
        safe = self._urls.get(url)
        if safe is None:
            if len(self._urls) > 1024:
                self._urls.clear()
            redacted = redact_cut(url)
            safe = self._urls[url] = redacted if isinstance(redacted, str) else redacted["cut"]
        return safe

    def _by(self, entry: int, identity: Identity, action: Action | None) -> dict[str, Any]:
        if action is not None and action.via == "agentenv":
            return {"kind": "agentenv"}
        by: dict[str, Any] = {"kind": "command", "entry": entry, "via": "cdp", "who": identity.user}
        if action is not None:
            by["within"] = action.entry
        return by

    def settle_params(self, entry: int) -> None:
        """Redact an open command's params now (a big message: its parsed
        form is not kept until Chromium answers)."""
        self.writer.settle(entry)

    def end(self, command: Ended) -> None:
        """Write a command's entry (:class:`~agentenv.relay.effects.Ended`)."""
        entry, ok, error, guard, opened = command
        if guard is None and opened is None and error is None:  # the common case, kept lean
            self.writer.end(entry, ok)
            if entry in self.causes.commands:
                self._write_tabs(self.causes.answered(entry, ok, None, self.monotonic()))
            return
        more: ActionBody = {}
        if guard is not None:
            more["guard"] = cast(Guard, guard)
        if opened is not None:
            more["tab"] = opened
            url = self.causes.url(opened)
            if url is not None:
                more["url"] = self._safe_url(url)
        self.writer.end(entry, ok, redact_text(error[:4000])[:2000] if error else None, more)
        self._write_tabs(self.causes.answered(entry, ok, opened, self.monotonic()))

    def end_refused(self, entry: int, why: str, guard: dict[str, str] | None) -> None:
        """A refused command's entry ended (:class:`~agentenv.relay.decision.Refuse`):
        the guard's refusal counted by its rule and marked on the entry."""
        if guard is not None:
            self.counts.refused_by(guard["rule"])
        self.end(Ended(entry, False, why, guard=guard))

    def guarded(self, entry: int, guard: dict[str, str]) -> None:
        """Record what the guard did to a command still in flight (rewritten)."""
        self.writer.amend(entry, {"guard": cast(Guard, guard)})

    def unlogged_command(
        self, method: str, params: Mapping[str, Any] | None, tab: str | None
    ) -> int:
        """A key for a command of the computer's own reads (not on the record)
        that may still cause tab events: they are credited to ``agentenv``."""
        self._unlogged -= 1
        if method in TAB_METHODS:
            self.causes.sent(
                self._command(self._unlogged, method, params, tab, {"kind": "agentenv"})
            )
        return self._unlogged

    def end_unlogged(self, key: int, ok: bool, opened: str | None = None) -> None:
        self._write_tabs(self.causes.answered(key, ok, opened, self.monotonic()))

    # -- actions reported by the app server and the recorder -----------------

    def begin_action(self, owner: int, params: BeginAction, scope: str | None = None) -> int:
        """``AgentEnv.beginAction``: an action's entry, open until its end;
        ``scope``: the scope its connection acts in (two scopes or more).
        Raises ControlRefused for an agent's action while the log is full."""
        if params.via != "agentenv" and self.full:
            raise ControlRefused(self.full_message())
        over = self.over_budget(params.who) if params.via != "agentenv" else None
        if over is not None:
            self.budget_refused(params.who, owner, params.op or params.tool or "action", over)
            raise ControlRefused(over)
        fields: ActionBody = {"via": params.via, "who": params.who}
        if scope is not None:
            fields["scope"] = scope
        if params.role is not None:
            fields["role"] = params.role
        if params.tool is not None:
            fields["tool"] = params.tool
        if params.call is not None:
            fields["call"] = params.call
        if params.op is not None:
            fields["op"] = params.op
        fields["acts"] = params.acts
        if params.tab is not None:
            fields["tab"] = params.tab
            url = self.causes.url(params.tab)
            if url is not None:
                fields["url"] = self._safe_url(url)
        typed: dict[str, Any] = {}
        if params.acts == ACTING and params.args is not None:
            try:
                args = redact(params.args)
            except RecursionError:  # an agent's tool arguments nested too deep to walk
                args, params.typing[:] = {"withheld": "too deep"}, []
            for path in params.typing:
                typed.update(withhold_path(args, path))
            fields["args"] = args
        entry = self.writer.begin(fields)
        self._recording_moved(owner, params)
        self.actions[entry] = Action(
            entry,
            params.via,
            params.who,
            owner,
            _scope(params.scope),
            params.tab,
            typed,
            learns_tab=params.tab is None,
        )
        if params.acts == ACTING:
            self.causes.acting(params.tab, entry, "", self.monotonic(), params.who)
        return entry

    def _acted_on(self, action: Action, tab: str, url: str | None, where: bool) -> None:
        """An action that named no tab acted on ``tab`` (its command's): its
        entry says so, so its frame is taken there (docs/spec.md section 1); a script
        after its input does not move it (Playwright MCP reads every tab's title)."""
        if action.moved and not where:
            return
        action.tab, action.moved = tab, action.moved or where
        if url is not None:
            self.writer.amend(action.entry, {"tab": tab, "url": url})
        else:
            self.writer.amend(action.entry, {"tab": tab}, drop=("url",))

    def _recording_moved(self, owner: int, params: BeginAction) -> None:
        if params.via != "agentenv" or not isinstance(params.args, dict):
            return
        recording = params.args.get("recording_id")
        if not isinstance(recording, str):
            return
        if params.op == "browser-recording/start":
            self.recordings[recording] = owner
        elif params.op == "browser-recording/end":
            self.recordings.pop(recording, None)

    def target(self, entry: int, found: dict[str, str]) -> None:
        """What a press landed on, or the field typing went into: on its
        entry, and on the pixel op it ran for when that names none yet."""
        fields = self.writer.fields(entry)
        if fields is None:
            return
        self.writer.amend(entry, {"target": found})
        within = fields.get("within")
        if not isinstance(within, int):
            return
        outer = self.writer.fields(within)
        if outer is not None and "target" not in outer and outer.get("op") in _NAMED_OPS:
            self.writer.amend(within, {"target": found})

    def end_action(self, owner: int, params: EndAction) -> None:
        """``AgentEnv.endAction``; raises ControlRefused for an entry not open here."""
        entry = params.entry
        if entry not in self.actions:
            raise ControlRefused("entry is not an open action (was the relay restarted?)")
        if self.actions[entry].owner != owner:
            raise ControlRefused("entry was begun by another connection")
        action = self.actions.pop(entry)
        more: ActionBody = {}
        if action.typed and action.cleared and action.checked:
            fields = self.writer.fields(entry)
            if fields is not None and "args" in fields:
                # Every check cleared: the typed text goes back, in a copy.
                args = copy.deepcopy(fields["args"])
                restore_paths(args, action.typed)
                more["args"] = args
        error = params.error
        message = redact_text(error[:4000])[:2000] if error is not None else None
        if params.guard is not None:
            more["guard"] = cast(Guard, params.guard.model_dump())
            self.counts.refused_by(params.guard.rule)
        self.writer.end(entry, params.ok, message, more)

    def typing_checked(
        self, conn: int, tag: str | None, cleared: bool, identity: Identity | None = None
    ) -> None:
        """A typing command within an action was checked; if it was withheld, so
        is the action's typed text. Text is kept only once every check cleared,
        and at least one ran."""
        action = self.within(conn, tag, identity)
        if action is not None:
            action.checked = True
            action.cleared = action.cleared and cleared

    def drop_owner(self, owner: int) -> None:
        """A reporting connection left: end its open actions."""
        for recording in [r for r, o in self.recordings.items() if o == owner]:
            del self.recordings[recording]  # the recorder went away: they are forgotten
        for entry in [e for e, a in self.actions.items() if a.owner == owner]:
            del self.actions[entry]
            self.writer.end(entry, False, "the reporting program disconnected before the end")

    # -- Chromium's tab events ----------------------------------------------

    def _write_tabs(self, events: list[dict[str, Any]], gone: str | None = None) -> None:
        """Write tab events, each counted against the share that pays for it
        (:func:`~agentenv.relay.log_budget.tab_share`); a page's own, once that
        share is spent, counted instead (a ``tabs/counted`` line a minute).
        ``gone``: the payer of a tab just forgotten (its close)."""
        for event in events:
            event = dict(event, url=self._safe_url(event.get("url") or ""))
            tab = event.get("id")
            scope = None
            known = None
            if isinstance(tab, str):
                known = self.causes.tabs.get(tab)
                scope = self._tab_scopes.get(tab)
                if scope is None:
                    scope = self.scope_of(known.context if known is not None else None)
                    if scope is not None:
                        self._tab_scopes[tab] = scope
                if scope is not None:
                    event["scope"] = scope
                if event.get("event") == "closed":
                    self._tab_scopes.pop(tab, None)
            payer = known.pays() if known is not None else gone
            share, own = tab_share(event.get("by") or {}, scope, self.users_of(scope), payer)
            if share is not None and not own and known is not None:
                known.payer = share  # a command moved it: its sender pays, if no agent acts
            if own and share is not None and self.budget.over(self.writer, share) is not None:
                minute = int(self.writer.monotonic() // 60)
                told = self.budget.tab_counted(share, str(tab), scope, minute)
                if told is not None:
                    self.writer.record("action", told)
                continue
            self.writer.record("tab", event, share)

    def created(self, tab: str, url: str, opener: str | None, context: str | None = None) -> None:
        self._write_tabs(self.causes.created(tab, url, opener, self.monotonic(), context))

    def navigated(self, tab: str, url: str) -> None:
        self._write_tabs(self.causes.navigated(tab, url, self.monotonic()))

    def destroyed(self, tab: str) -> None:
        known = self.causes.tabs.get(tab)
        gone = known.pays() if known is not None else None
        self._write_tabs(self.causes.destroyed(tab, self.monotonic()), gone)

    def ended(self, kind: str, why: str | None = None) -> None:
        """Every tab closed (``kind``: ``exit`` when Chromium went away,
        ``why`` the cause when the relay could tell it)."""
        self._write_tabs(self.causes.ended(kind))
        if kind == "exit":
            # Why every tab closed, on the record even with no tab open: a
            # recording notes the gap in its manifest (issue 22).
            cause = why or "it exited: killed or crashed"
            self.writer.record(
                "action",
                {
                    "via": "agentenv",
                    "who": "agentenv",
                    "op": BROWSER_EXITED,
                    "acts": READING,
                    "ok": False,
                    "error": f"Chromium's connection ended ({cause}): every tab closed, and "
                    "it restarts; clients connect again when /readyz says ready",
                },
            )

    def tick(self) -> None:
        """Once a second: write stalled actions (which also reads the wall
        clock's offset again, before any other line), release held tab events."""
        self.writer.check_stalled()
        self._write_tabs(self.causes.tick(self.monotonic()))
        for told in self.budget.tabs_due(int(self.writer.monotonic() // 60)):
            self.writer.record("action", told)

    def reset(self, reason: str) -> int:
        return self.writer.record("reset", {"reason": reason})


def _scope(items: list[int | str]) -> ActionScope:
    conns = frozenset(i for i in items if isinstance(i, int))
    tags = frozenset(i for i in items if isinstance(i, str))
    return ActionScope(conns, tags)
