"""One client's commands read and decided in one place, for every door that
takes them: a CDP connection (:mod:`agentenv.relay.proxy`) and the relay's
HTTP commands (:mod:`agentenv.relay.http_commands`). No I/O.

Shaped as h11 holds an HTTP connection: the door hands a message in
(:meth:`Connection.client`, :meth:`Connection.http`) and gets back either
what becomes of it (:class:`Ready`: the core's :class:`~agentenv.relay.core.Step`
and the :mod:`~agentenv.relay.decision`), or what the rules must learn first,
which only waiting can tell:

- :class:`TabPage`: a ``Target.activateTarget``/``closeTarget`` named a
  tab-type target whose page nobody knows yet (chromedriver's window
  handles). The door has the watcher find it (bounded), which teaches the
  shared :class:`~agentenv.relay.known.Known`, then :meth:`Connection.learn`
  (:class:`Looked`) reads the message again with that fact.
- :class:`World`: the command names an execution context while the relay
  makes its world in the tab (:func:`agentenv.relay.world_rule.relay_world`).
  The door waits until it is made or the wait runs out (:class:`WorldDone`).
- :class:`Person`: an agent's acting command in a scope a person drives
  (relay/person_holds.py). The door waits for them (bounded) and says whether
  they let go (:class:`PersonLeft`) or still hold it (:class:`PersonStayed`,
  which refuses the command on the record).

What only the log knows (whether the control token's command is inside an
action, and the log's room for an agent: :class:`LogRoom`) is asked of the
:class:`~agentenv.relay.logbook.Logbook` as the rules need it; who holds a
scope is read from the watcher's :class:`~agentenv.relay.person_holds.PersonHolds`.

The door then carries the decision out: answers, sends, and the entry
(:func:`agentenv.relay.core.begin_of`). Every refusal, the person's too, is
a :class:`~agentenv.relay.decision.Refuse` the door writes and answers one way.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import orjson

from agentenv.protocol.log import ACTING
from agentenv.relay import core
from agentenv.relay.client_state import ClientState
from agentenv.relay.commands import acts
from agentenv.relay.core import Downstream, Kind, Step
from agentenv.relay.decision import Decision, Refuse, decide, page_refusal, person_refusal
from agentenv.relay.downstream import page_found
from agentenv.relay.person_holds import ASKS, PersonHolds
from agentenv.relay.scope_rule import page_endpoint
from agentenv.relay.vault import HOME, Vault

__all__ = [
    "Connection",
    "Fact",
    "LogRoom",
    "Looked",
    "Need",
    "Person",
    "PersonLeft",
    "PersonStayed",
    "Read",
    "Ready",
    "TabPage",
    "World",
    "WorldDone",
]


class LogRoom(Protocol):
    """What the rules ask of the log (:class:`~agentenv.relay.logbook.Logbook`)."""

    def within(self, conn: int, tag: str | None) -> object | None: ...

    def log_refusal(self, who: str, conn: int, method: str) -> tuple[bool, str] | None: ...


class Ready(NamedTuple):
    """The command read (``step``) and what becomes of it (``decision``)."""

    step: Step
    decision: Decision


class TabPage(NamedTuple):
    """Find the page of the tab-type target ``tab``, then :class:`Looked`."""

    tab: str


class World(NamedTuple):
    """Wait (bounded) until the relay's world in ``tab`` is made, then :class:`WorldDone`."""

    tab: str | None


class Person(NamedTuple):
    """A person holds ``scope``: wait (bounded) for them, then
    :class:`PersonLeft` or :class:`PersonStayed`."""

    scope: str


class Looked(NamedTuple):
    """The watcher looked for the tab's page (what it found is in ``Known``)."""


class WorldDone(NamedTuple):
    """The relay's world was made, or the wait ran out."""


class PersonLeft(NamedTuple):
    """The person let go of the scope."""


class PersonStayed(NamedTuple):
    """The person still holds the scope: ``who``, for ``left_s`` more, after
    the command waited ``waited_s``."""

    who: str
    left_s: float
    waited_s: float


Need = TabPage | World | Person
Read = Ready | Need
Fact = Looked | WorldDone | PersonLeft | PersonStayed


class Connection:
    """One client's commands, one at a time (a door reads the next only once
    this one is :class:`Ready`)."""

    __slots__ = (
        "_data",
        "_decision",
        "_http",
        "_step",
        "downloads",
        "holds",
        "log",
        "state",
        "vault",
    )

    def __init__(
        self,
        state: ClientState,
        downloads: str,
        log: LogRoom,
        holds: PersonHolds | None = None,
        vault: Vault | None = None,
    ) -> None:
        self.state = state
        #: The credential vault (None: no password is withheld).
        self.vault = vault
        self.downloads = downloads
        self.log = log
        self.holds = holds
        self._data = ""
        self._http = False
        self._step: Step | None = None
        self._decision: Decision | None = None

    def client(self, data: str) -> Read:
        """A text message from a CDP client."""
        self._data, self._http = data, False
        return self._read()

    def http(self, method: str, params: dict[str, object]) -> Read:
        """An HTTP command that stands for ``method`` on the browser's session
        (``/json/new``, ``close``, ``activate``): read as a CDP client's would
        be, and on the record even from the control token (never its own)."""
        data = orjson.dumps({"id": 1, "method": method, "params": params}).decode()
        self._data, self._http = data, True
        return self._read()

    def page(self, target: str, listed: object) -> tuple[Step, Refuse] | None:
        """Whether this connection, asked for at ``/devtools/page/<target>``,
        may open it, by Chromium's own ``/json/list`` (``listed``): None,
        or its refusal (:func:`~agentenv.relay.decision.page_refusal`) with
        the attach it stands for, which the door writes when it is on the
        record and answers with its status, before any WebSocket upgrade."""
        verdict = page_endpoint(self.state.known, self.state.scope, listed, target)
        if verdict is None:
            return None
        attach = Step(
            Kind.BLOCK, None, None, "Target.attachToTarget", {"targetId": target}, target, verdict
        )
        return attach, page_refusal(attach)

    def learn(self, fact: Fact) -> Read:
        """What the door found for the :data:`Need` it was given."""
        step, decision = self._step, self._decision
        assert step is not None, "learn() answers a Need from client() or http()"
        self._step = self._decision = None
        if isinstance(fact, Looked):
            return self._read(looked=True)
        if isinstance(fact, WorldDone):
            return self._decided(core.world_made(self.state, step))
        if isinstance(fact, PersonLeft):
            assert decision is not None
            return Ready(step, decision)
        return Ready(step, person_refusal(step, fact.who, fact.left_s, fact.waited_s))

    # -- Chromium to the client ----------------------------------------------

    def answer_first(self, data: str) -> bool:
        """Whether ``data`` (Chromium's) is an answer the client may have
        before the rules read it: they read it right after, before the next
        message (:func:`agentenv.relay.core.answer_first`)."""
        return core.answer_first(self.state, data)

    def chromium(self, data: str) -> Downstream:
        """A message from Chromium: what the client gets, the relay's own
        commands it calls for, and what the log notes (relay/downstream.py)."""
        return core.from_upstream(self.state, data)

    def shown(self, data: str) -> str:
        """What this client gets of ``data``, a text message on its way to
        it: a password the vault filled in an agent's scope is never read
        back to it (relay/vault.py); the control token's links get it as it
        is."""
        vault = self.vault
        if vault is None or self.state.identity.control:
            return data
        scope = self.state.scope
        return vault.scrub(scope.name if scope is not None else HOME, data)

    def page_found(self, down: Downstream, page: str | None) -> Downstream:
        """A ``createTarget{forTab}`` answer (:attr:`Downstream.page_of`)
        once the door's watcher has looked for the tab's page (None: not
        found in time): its entry ends naming the page, which the client
        may see from now on."""
        return page_found(self.state, down, page)

    # -- the rules, in order -------------------------------------------------

    def _read(self, looked: bool = False) -> Read:
        state = self.state
        step = core.receive(state, self._data, self.downloads, state.known.target)
        if not looked:
            tab = core.tab_page_wanted(step)
            if tab is not None and state.known.tab_page(tab) is None:
                return self._held(step, TabPage(tab))
        if step.hold:  # it names a context while the relay makes its world there
            return self._held(step, World(step.tab))
        return self._decided(step)

    def _decided(self, step: Step) -> Read:
        state = self.state
        identity = state.identity
        # The computer's own command, outside any action: off the record
        # (a CDP link's; an HTTP command is always on it).
        own = (
            not self._http and identity.control and self.log.within(state.number, state.tag) is None
        )
        # An agent's command would be written: not once the log is full, or
        # this user's share of it is spent (others' is not).
        if own or (identity.control and (self._http or step.kind is Kind.CONTROL)):
            room = None
        else:
            room = self.log.log_refusal(identity.user, state.number, step.method)
        decision = decide(step, own, room)
        if identity.control or isinstance(decision, Refuse) or self.holds is None:
            return Ready(step, decision)
        # An agent's act (its fill too) waits while a person drives its scope.
        scope = state.scope.name if state.scope is not None else HOME
        if (
            self.holds.holder(scope) is None
            or step.method == ASKS  # asking for a person is never held
            or acts(step.method, step.params) != ACTING
        ):
            return Ready(step, decision)
        return self._held(step, Person(scope), decision)

    def _held(self, step: Step, need: Need, decision: Decision | None = None) -> Need:
        """``need`` must be met before ``step`` is ready: it is kept (as read
        now, and as decided so far) for what :meth:`learn` is told."""
        self._step, self._decision = step, decision
        return need
