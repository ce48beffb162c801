"""The ``scope`` rule: what one client may name when its token acts in a
scope (:mod:`agentenv.scopes`), and what the control token may not name
before a warm context is handed out (:mod:`agentenv.relay.warm`), on CDP
and on the HTTP endpoints (``/json/list``, ``/devtools/page/<id>``). No I/O.

What names another scope is answered as Chromium answers an id it does not
know, so no answer tells a client that the id exists. The rule fails closed:
a target is the scope's by what the watcher knows (:attr:`ClientState.known`),
or because it was shown to this client (a tab it just opened, before the
watcher hears of it).
"""

from __future__ import annotations

from typing import Any

from agentenv import scopes
from agentenv.relay import guard
from agentenv.relay.client_state import ClientState
from agentenv.relay.known import Known
from agentenv.scopes import Scope

__all__ = ["in_scope", "listing", "page_endpoint", "reaches", "scope_verdict", "shown", "warm"]


def shown(scope: Scope, state: ClientState, tab: str | None) -> bool:
    """Whether ``tab`` may be named on a line of this client's: none, or one
    of its scope's (by what the watcher knows, or shown to this client)."""
    if tab is None:
        return True
    context = state.known.context_of(tab)
    return scope.holds(context) if context is not None else tab in state.visible


def in_scope(
    scope: Scope,
    state: ClientState,
    browser_level: bool,
    method: str,
    params: dict[str, Any] | None,
) -> guard.Verdict | dict[str, Any] | None:
    """The ``scope`` rule (:mod:`agentenv.scopes`): what names another
    scope is answered as Chromium answers an id it does not know (its
    verdict); what means the default context means the scope's (the params
    to send instead); None: neither."""
    if method in scopes.BY_TARGET:
        target = params.get("targetId") if params else None
        # Fail closed: the scope's by what the watcher knows, or shown to
        # this client (a tab it just opened, before the watcher hears of it).
        if isinstance(target, str) and not shown(scope, state, target):
            return scope_verdict("No target with given id found", -32602)
        return None
    if method in scopes.BY_CONTEXT:
        context = params.get("browserContextId") if params else None
        if context is None:
            return {**(params or {}), "browserContextId": scope.context}
        if context is not None and not scope.holds(context):
            return scope_verdict("Failed to find browser context for id " + str(context)[:64])
        return None
    if method in scopes.BY_WINDOW:
        # Window ids are small numbers: only one of its own tabs' windows.
        window = params.get("windowId") if params else None
        if window not in state.windows:
            return scope_verdict("Browser window not found", -32602)
        return None
    if method == "Target.disposeBrowserContext":
        context = params.get("browserContextId") if params else None
        if isinstance(context, str) and context in scope.made:
            return None
        if context == scope.context:
            return scope_verdict(
                "the default browser context cannot be disposed; close its tabs instead"
            )
        return scope_verdict("Failed to find context with id " + str(context)[:64])
    if browser_level and method in scopes.NO_BROWSER_LEVEL:
        return guard.Verdict(
            "browser-wide",
            f"blocked by agentenv guard browser-wide: {method} on the browser's own session "
            "acts on no agent's browser; send it on a page's session, or use Storage.getCookies, "
            "setCookies or clearCookies (kept to your browser)",
        )
    return None


def warm(state: ClientState, method: str, params: dict[str, Any] | None) -> guard.Verdict | None:
    """A link that sees every scope (the control token's) reaches no warm
    context before a scope is handed it (:mod:`agentenv.relay.warm`):
    answered as Chromium answers an id it does not know, rule ``scope``."""
    if not params:
        return None
    if method in scopes.BY_TARGET:
        target = params.get("targetId")
        if isinstance(target, str) and state.known.withheld(state.known.context_of(target)):
            return scope_verdict("No target with given id found", -32602)
    elif method in scopes.BY_CONTEXT or method == "Target.disposeBrowserContext":
        context = params.get("browserContextId")
        if state.known.withheld(context):
            return scope_verdict("Failed to find browser context for id " + str(context)[:64])
    return None


def scope_verdict(text: str, code: int = -32000) -> guard.Verdict:
    return guard.Verdict("scope", text, code=code)


def reaches(known: Known, scope: Scope | None, target: str) -> bool:
    """Whether a link acting in ``scope`` sees and reaches ``target``: one of
    its scope's contexts; for a link of every scope (None), any target but a
    warm context's no scope was handed."""
    context = known.context_of(target)
    if scope is None:
        return not known.withheld(context)
    return scope.holds(context)


def _web(target: dict[str, Any]) -> bool:
    kind, url = target.get("type"), target.get("url")
    return isinstance(kind, str) and isinstance(url, str) and guard.web_target((kind, url))


def listing(known: Known, scope: Scope | None, listed: object) -> list[dict[str, Any]]:
    """Chromium's ``/json/list`` as a link of ``scope`` is shown it: the web
    targets it reaches, nothing else (not JSON's list: nothing)."""
    if not isinstance(listed, list):
        return []
    return [
        t
        for t in listed
        if isinstance(t, dict) and _web(t) and reaches(known, scope, str(t.get("id")))
    ]


def page_endpoint(
    known: Known, scope: Scope | None, listed: object, target: str
) -> guard.Verdict | None:
    """Whether a link of ``scope`` may open ``/devtools/page/<target>``, by
    Chromium's own ``/json/list`` (``listed``): not listed, or not its
    scope's, is refused as a page that does not exist (rule ``scope``, not on
    the record: it names nothing the link may know); a target that is not web
    content, by the guard (``not-a-web-target``, on the record)."""
    found = None
    if isinstance(listed, list):
        found = next((t for t in listed if isinstance(t, dict) and t.get("id") == target), None)
    if found is None or not reaches(known, scope, target):
        return scope_verdict(f"no page {target[:64]!r}: list pages with /json/list")
    if not _web(found):
        return guard.web_target_verdict()
    return None
