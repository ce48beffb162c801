"""Scopes: each agent's browser, inside the one Chromium (docs/spec.md section 7).
No I/O.

With users configured in two scopes or more, each scope acts in a browser
context of its own, and every client in it sees that context as the
browser's default: its tabs, its cookies and storage, its downloads, its
permissions. The first scope ``AGENTENV_USERS`` names is the computer's
**home** scope: its context is Chromium's own default one, where the
control token's ops act unless told otherwise (the harness's single agent
is always there, and a computer of one scope is all home). Every other
scope's context is made when one of its users first connects, with one
blank tab in it, as a fresh Chromium has. Other scopes' targets, contexts, sessions,
events and downloads are invisible and unreachable by every route the relay
carries: ``Target.*`` by id, sessions, auto-attach, target discovery,
``Target.getTargets``/``getBrowserContexts``, the browser-level cookie,
permission and download calls, and the HTTP discovery paths.

A scope opened on demand (``scopes/open``, :mod:`agentenv.opened`) is one
of its own: its name is its one user's, whose token the relay minted; its
context is handed over at once (a warm one made ahead, :mod:`agentenv.relay.warm`,
which no scope holds until then), and disposed of when it is closed.

With one scope (one user, or every user grouped into one) and none to be
opened on demand, nothing is translated at all: with one agent on a
computer nothing changes. Without
users there are no scopes. The control token (the harness, the app, the
recorder) sees every scope; Playwright MCP acts with a token granted for its
caller, in the caller's scope.

How the rules answer an attempt on another scope: as Chromium answers for
an id it does not know ("No target with given id found"), so an agent
learns nothing of what it cannot reach; the entry records the guard's rule
``scope``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentenv.access import Identity
from agentenv.opened import opened_of
from agentenv.settings import Settings

__all__ = [
    "BY_CONTEXT",
    "BY_TARGET",
    "BY_WINDOW",
    "NO_BROWSER_LEVEL",
    "Scope",
    "Scopes",
    "contexts_answer",
    "contexts_without",
    "targets_answer",
    "targets_without",
]

#: Commands naming a target by ``targetId``: only the scope's.
BY_TARGET = frozenset(
    {
        "Target.attachToTarget",
        "Target.activateTarget",
        "Target.closeTarget",
        "Target.getTargetInfo",
        "Target.autoAttachRelated",
        "Target.getDevToolsTarget",
        "Browser.getWindowForTarget",
    }
)

#: Commands naming a window by ``windowId``: only a window the client was
#: given for one of its scope's tabs (``Browser.getWindowForTarget``).
BY_WINDOW = frozenset(
    {"Browser.getWindowBounds", "Browser.setWindowBounds", "Browser.setContentsSize"}
)

#: Browser-level commands with an optional ``browserContextId``: without one
#: Chromium means its default context; the relay means the scope's.
BY_CONTEXT = frozenset(
    {
        "Target.createTarget",
        "Storage.getCookies",
        "Storage.setCookies",
        "Storage.clearCookies",
        "Browser.setDownloadBehavior",
        "Browser.grantPermissions",
        "Browser.resetPermissions",
        "Browser.setPermission",
        "Browser.cancelDownload",
    }
)

#: Browser-level calls with no per-context form that would act on Chromium's
#: default context (no scope's): sent on a page's session they are the page's.
NO_BROWSER_LEVEL = frozenset(
    {
        "Network.getAllCookies",
        "Network.clearBrowserCookies",
        "Network.clearBrowserCache",
        "Network.getCookies",
        "Network.setCookie",
        "Network.setCookies",
        "Network.deleteCookies",
    }
)


@dataclass
class Scope:
    """One scope: its name, its own context, and the contexts its agents made."""

    name: str
    #: The scope's own context (what its clients see as the default one;
    #: Chromium's own default context for the home scope).
    context: str
    made: set[str] = field(default_factory=set)

    def holds(self, context: object) -> bool:
        return isinstance(context, str) and (context == self.context or context in self.made)


def _none() -> frozenset[str]:
    return frozenset()


def _never(name: str) -> bool:
    return False


@dataclass
class Scopes:
    """Every scope of the computer, made as their users first connect (a
    scope opened on demand: as it opens)."""

    #: user -> the scope they act in (settings.scopes).
    by_user: Mapping[str, str] = field(default_factory=dict)
    made: dict[str, Scope] = field(default_factory=dict)
    #: Whether scopes may be opened on demand (``AGENTENV_MAX_SCOPES``).
    on_demand: bool = False
    #: The names of the scopes opened on demand now (each its one user's).
    opened: Callable[[], frozenset[str]] = _none
    #: Whether a scope opened on demand is open and not being closed.
    still_open: Callable[[str], bool] = _never

    @classmethod
    def of(cls, settings: Settings) -> Scopes:
        """The computer's scopes: the fixed ones of ``AGENTENV_USERS``, and
        those opened on demand as the open scopes' file says."""
        if not settings.max_scopes:
            return cls(settings.scopes)
        opened = opened_of(settings.scopes_file)

        def still_open(name: str) -> bool:
            found = opened.scopes().get(name)
            return found is not None and not found.closing

        return cls(settings.scopes, on_demand=True, opened=opened.names, still_open=still_open)

    @property
    def home(self) -> str | None:
        """The home scope's name (the first one listed), in Chromium's own
        context; None on a computer whose scopes are all opened on demand
        (its default context is the control token's alone)."""
        return next(iter(self.by_user.values()), None)

    @property
    def isolated(self) -> bool:
        """Whether scopes are browser contexts of their own (two fixed
        scopes or more, or any may be opened on demand)."""
        return self.on_demand or len(set(self.by_user.values())) >= 2

    @property
    def fixed(self) -> frozenset[str]:
        """The scopes of ``AGENTENV_USERS``."""
        return frozenset(self.by_user.values())

    def names(self) -> frozenset[str]:
        """Every scope now: the fixed ones and the open ones."""
        return self.fixed | self.opened()

    def name_for(self, identity: Identity) -> str | None:
        """The scope a connection acts in; None when it sees every scope (the
        control token) or when there is no isolation."""
        if identity.control or not self.isolated:
            return None
        fixed = self.by_user.get(identity.user)
        if fixed is not None:
            return fixed
        if identity.scope is not None:  # a person of an opened scope: it, else none
            return identity.scope
        if identity.user in self.opened():
            return identity.user
        # A caller who is no user (the control token's own Playwright MCP, a
        # role it named) acts in the home scope, where the control token's
        # ops act: it makes no scope of its own.
        return self.home

    def closed(self, identity: Identity) -> bool:
        """Whether ``identity`` (as a token proved it) is the agent of a scope
        opened on demand that is closed, or being closed, now. Such a caller
        acts in no scope: not its closed one, not one opened again under its
        name, and never the home scope, where :meth:`name_for` puts a caller
        who is no user. Every door asks this before it acts for an agent
        whose token was checked earlier (an op's body, an MCP call)."""
        if identity.control or not self.on_demand or identity.user in self.by_user:
            return False
        return not self.still_open(identity.scope or identity.user)

    def users_of(self, scope: str | None) -> list[str]:
        """The users who act in ``scope``; for None (no isolation), every
        user: a computer of one scope is theirs together."""
        if scope is None:
            return [] if self.isolated else list(self.by_user)
        users = [user for user, theirs in self.by_user.items() if theirs == scope]
        if not users and scope in self.opened():
            return [scope]
        return users

    def unknown(self, asked: str | None) -> str | None:
        """Why ``asked`` names no scope of this computer (None: it names one,
        or nothing): what an op or a recording that names it is told."""
        names = self.names()
        if asked is None or asked in names:
            return None
        known = ", ".join(sorted(names)) or "none: AGENTENV_USERS names no users"
        if self.on_demand:
            known += "; scopes/list lists the scopes opened on demand"
        return f"no scope {asked[:64]!r} on this computer (its scopes: {known})"

    def owner(self, context: object) -> Scope | None:
        for scope in self.made.values():
            if scope.holds(context):
                return scope
        return None

    def forget(self) -> None:
        """Chromium went away, and every context with it."""
        self.made.clear()

    def drop(self, name: str) -> Scope | None:
        """The scope ``name`` (opened on demand) is closed or reset: it is
        forgotten with every context it made, which the caller disposes of."""
        return self.made.pop(name, None)

    def reset(self) -> None:
        """Every context but Chromium's own was disposed of (``data/reset``):
        the home scope stays, with nothing made; the others are made again
        when their users next connect."""
        home = self.made.get(self.home) if self.home is not None else None
        self.made.clear()
        if home is not None:
            home.made.clear()
            self.made[home.name] = home


def targets_answer(scope: Scope, result: Mapping[str, Any]) -> dict[str, Any]:
    """``Target.getTargets``'s result with only the scope's targets."""
    infos = result.get("targetInfos")
    kept = [
        i
        for i in (infos if isinstance(infos, list) else [])
        if isinstance(i, Mapping) and scope.holds(i.get("browserContextId"))
    ]
    return {**result, "targetInfos": kept}


def contexts_answer(scope: Scope, result: Mapping[str, Any]) -> dict[str, Any]:
    """``Target.getBrowserContexts``'s result as the scope's browser has it:
    the contexts its agents made; its own context is the default."""
    out: dict[str, Any] = {**result, "browserContextIds": sorted(scope.made)}
    if "defaultBrowserContextId" in result:
        out["defaultBrowserContextId"] = scope.context
    return out


def targets_without(
    withheld: Callable[[object], bool], result: Mapping[str, Any]
) -> dict[str, Any]:
    """``Target.getTargets``'s result without the targets of a context
    ``withheld`` names (a warm one no scope was handed yet: relay/warm.py)."""
    infos = result.get("targetInfos")
    kept = [
        i
        for i in (infos if isinstance(infos, list) else [])
        if not (isinstance(i, Mapping) and withheld(i.get("browserContextId")))
    ]
    return {**result, "targetInfos": kept}


def contexts_without(
    withheld: Callable[[object], bool], result: Mapping[str, Any]
) -> dict[str, Any]:
    """``Target.getBrowserContexts``'s result without the contexts ``withheld`` names."""
    ids = result.get("browserContextIds")
    kept = [c for c in (ids if isinstance(ids, list) else []) if not withheld(c)]
    return {**result, "browserContextIds": kept}
