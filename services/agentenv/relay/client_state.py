"""One client connection's state, as both halves of the relay's core keep
it (:mod:`agentenv.relay.core`: client to Chromium; :mod:`agentenv.relay.downstream`:
Chromium to client). No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from agentenv.access import Identity
from agentenv.relay.causes import Served, origin
from agentenv.relay.known import Known
from agentenv.relay.traces import Traces
from agentenv.relay.worlds import RelayWorlds
from agentenv.scopes import Scope

__all__ = [
    "BROWSER_TARGET",
    "IGNORE_CERTIFICATES",
    "MAX_PAUSED",
    "WORKERS",
    "ClientState",
    "InLog",
    "Pending",
    "SessionInfo",
    "certificates_command",
]

#: Target types whose script serves pages from no tab of its own: what is
#: sent there acts on the pages the worker serves.
WORKERS = frozenset({"service_worker", "shared_worker"})
#: Opens a session on the browser target: allowed only where the browser's
#: own session is (it has its powers), and served as that session is
#: (:attr:`SessionInfo.browser`).
BROWSER_TARGET = "Target.attachToBrowserTarget"
#: Paused requests a connection keeps the tab of (:attr:`ClientState.paused`).
MAX_PAUSED = 10_000


class InLog(Enum):
    """What a command in flight is to the log: on the record (its answer ends
    its entry), the computer's own off the record (its answer may still end a
    tab event's cause, ``by: agentenv``), or the computer's own read whose
    answer is only kept to the scope (no entry, no key)."""

    LOGGED = "logged"
    UNLOGGED = "unlogged"
    KEPT = "kept"


@dataclass
class Pending:
    """A command sent to Chromium and not yet answered."""

    #: Its log entry (:attr:`InLog.LOGGED`), or its key for the tab events
    #: it may cause (:attr:`InLog.UNLOGGED`); 0 when neither.
    entry: int
    method: str
    params: Any
    tab: str | None = None
    acting: bool = False
    in_log: InLog = InLog.LOGGED


@dataclass
class SessionInfo:
    tab: str | None
    web: bool = True
    #: The session's target is its tab (not one of its frames or workers):
    #: a Page.navigate there navigates the tab.
    own: bool = True
    #: A service or shared worker's: it belongs to no tab and can act on the
    #: pages it serves (clients.navigate()); see ``worker``.
    everywhere: bool = False
    #: A page's or frame's (not a worker's): its certificate errors are its own.
    framed: bool = True
    #: The worker's own target id, on a service or shared worker's session:
    #: its acting commands count on the tabs it serves (:meth:`ClientState.served`).
    worker: str | None = None
    #: A session on the browser target (``Target.attachToBrowserTarget``):
    #: served exactly as the browser endpoint's own session, whose powers it
    #: has (:meth:`ClientState.at_browser`).
    browser: bool = False
    #: The session it was attached on (None: the connection's own): Chromium
    #: ends it, without a word, when that one detaches.
    parent: str | None = None


@dataclass
class ClientState:
    """One client connection: its number (from 1 per relay boot), who it is,
    an optional tag (``AgentEnv-Tag``), and the tab of a page endpoint."""

    number: int
    identity: Identity
    tag: str | None = None
    page: str | None = None
    sessions: dict[str, SessionInfo] = field(default_factory=dict)
    pending: dict[tuple[str | None, int], Pending] = field(default_factory=dict)
    #: Ids of the relay's own commands on this connection (negative).
    own: set[int] = field(default_factory=set)
    next_own: int = -1
    #: The client changed where downloads go: set it back when it leaves.
    downloads_changed: bool = False
    #: ``Security.setIgnoreCertificateErrors`` on the browser's own session of
    #: a computer of two scopes or more (Puppeteer's ``acceptInsecureCerts``):
    #: kept to this connection's pages and frames, each told on its session.
    ignore_certificates: bool = False
    #: Sessions the client set certificate errors on itself (ignored or
    #: handled): the relay's browser-level setting leaves them as it set them.
    certificates_own: set[str] = field(default_factory=set)
    #: Sessions the relay told to ignore certificate errors.
    certificates_told: set[str] = field(default_factory=set)
    #: Chromium's targets as the watcher learned them (relay/known.py): a
    #: target's type and URL, its tab (a session attached straight to an
    #: iframe acts on that tab), its context, a tab-type target's page, and
    #: the warm contexts no link sees or reaches, the control token's neither.
    known: Known = field(default_factory=Known, repr=False)
    #: A page endpoint's target is its tab (not a frame of one).
    page_own: bool = True
    #: A page endpoint of a service or shared worker: the worker's target id.
    page_worker: str | None = None
    #: The relay's own worlds (the watcher's): never listed, never named.
    worlds: RelayWorlds = field(default_factory=RelayWorlds, repr=False)
    #: The browser's one trace and the finished ones (the watcher's, shared).
    traces: Traces = field(default_factory=Traces, repr=False)
    #: Sessions a pause in a relay world was undone on (its resume is due).
    resumed: set[str | None] = field(default_factory=set)
    #: The scope it acts in (None: it sees every scope, or there is one).
    scope: Scope | None = None
    #: Targets this client was shown (their destruction is its news too).
    visible: set[str] = field(default_factory=set)
    #: Downloads this client was told of (their progress is its news too).
    downloads: set[str] = field(default_factory=set)
    #: Windows of its scope's tabs it asked for (Browser.getWindowForTarget).
    windows: set[int] = field(default_factory=set)
    #: Requests paused on the browser's own session (``Fetch.requestPaused``
    #: with no session: interception of every tab), by requestId -> the tab
    #: whose request it is, the oldest forgotten past :data:`MAX_PAUSED`: a
    #: ``Fetch.*`` command naming one is that tab's.
    paused: dict[str, str] = field(default_factory=dict)
    #: Frames it heard load on its own sessions (an in-process iframe has no
    #: target of its own): frame -> its tab, the oldest forgotten past
    #: :data:`MAX_FRAMES`. A download from one is its news too.
    frames: dict[str, str] = field(default_factory=dict)

    def at_browser(self, session: str | None) -> bool:
        """Whether ``session`` is on the browser target: the browser
        endpoint's own session (no ``sessionId``), or one the client opened
        with ``Target.attachToBrowserTarget``. Every rule that reads the
        browser's own session reads both alike: same table, same scope,
        same record."""
        if session is None:
            return self.page is None
        info = self.sessions.get(session)
        return info is not None and info.browser

    def tab_of(self, session: str | None, method: str, params: dict[str, Any] | None) -> str | None:
        if params is not None and method.startswith("Target."):
            target = params.get("targetId")
            if isinstance(target, str):
                return target
        if session is not None and not self.at_browser(session):
            info = self.sessions.get(session)
            return info.tab if info is not None else None
        if self.paused and self.page is None and params is not None and method[:6] == "Fetch.":
            request = params.get("requestId")
            return self.paused.get(request) if isinstance(request, str) else None
        return self.page

    def served(self, session: str | None) -> Served | None:
        """The tabs a command on ``session`` reaches through a worker's script
        (a worker's session, or a worker's page endpoint), None for any other
        session: its browser context's tabs of its origin, as the watcher knows."""
        if session is None:
            worker = self.page_worker
        else:
            info = self.sessions.get(session)
            worker = info.worker if info is not None else None
        if worker is None:
            return None
        known = self.known.target(worker)
        return Served(self.known.context_of(worker), origin(known[1]) if known is not None else "")

    def own_tab(self, session: str | None) -> str | None:
        """The tab whose own target ``session`` is on (its page endpoint's, for
        no session): the id space of the relay's worlds in that tab."""
        if session is None:
            return self.page if self.page_own else None
        info = self.sessions.get(session)
        return info.tab if info is not None and info.own else None

    def forget(self, session: str) -> list[str]:
        """``session`` detached: it and every session attached through it
        (Chromium ends those with it and says nothing of them) are gone.
        The sessions forgotten, ``session`` first."""
        gone = [session] if session in self.sessions else []
        for name in gone:  # grows as children are found
            gone += [s for s, i in self.sessions.items() if i.parent == name and s not in gone]
        for name in gone:
            del self.sessions[name]
        return gone

    def own_id(self) -> int:
        call = self.next_own
        self.next_own -= 1
        self.own.add(call)
        return call

    def own_command(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> str:
        """A command of the relay's own on this connection (a negative id:
        its answer is dropped, never the client's), as sent."""
        command: dict[str, Any] = {"id": self.own_id(), "method": method}
        if params is not None:
            command["params"] = params
        if session is not None:
            command["sessionId"] = session
        return orjson.dumps(command).decode()


#: Chromium's browser-wide switch for certificate errors (kept to a scope).
IGNORE_CERTIFICATES = "Security.setIgnoreCertificateErrors"


def certificates_command(state: ClientState, session: str, ignore: bool) -> str:
    """The relay's own ``Security.setIgnoreCertificateErrors`` on ``session``."""
    return state.own_command(IGNORE_CERTIFICATES, {"ignore": ignore}, session)
