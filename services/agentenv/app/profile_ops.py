"""``profiles/save`` and ``profiles/load`` (control token; docs/spec.md
section 3, "Profiles"): a scope's sign-in state as one document
(:mod:`agentenv.protocol.profiles`), and that document restored into a
fresh scope.

Decisions:

- The computer keeps no profile. A save answers the document to the control
  token's caller (the harness), which seals it with a key only it holds and
  keeps it in the run's store (:mod:`agentenv.harness.profiles`); a load
  takes it back in its body. The computer never has the key, and the
  document is never written to its disk: it lives in the app server's
  memory for the op's length.
- Session storage: the scope's open tabs', given back to the tab in front
  of the scope a load fills (:mod:`agentenv.app.session_storage`).
- Permissions: the settings the scope's clients made, read from the log
  (:mod:`agentenv.app.profile_permissions`), sent again on load after the
  storage, each through the relay's rules.
- Which origins: the scope's open tabs', those whose local storage this
  computer wrote, and every origin the scope's lines of the log saw since
  the last ``data/reset`` (Chromium cannot list the sites that hold storage;
  the same rule as ``data/reset``'s). Each is read in a hidden tab served
  blank, by :data:`~agentenv.app.profile_scripts.READ_ORIGIN`; an origin
  holding nothing is left out of the document.
- On the record: each op is an action (acting: a save opens tabs, and a
  reading entry keeps no arguments) whose arguments are the scope and the
  name, never the document. A load's cookies go through
  ``Storage.setCookies`` (the log withholds every cookie's value) and each
  origin's state as the one string argument of a ``Runtime.callFunctionOn``
  (withheld, length kept). A save's reads are answered to the app, and the
  log keeps commands, not their answers.
- A load refuses (409) a scope that is not fresh: one holding any cookie, or
  any local storage or IndexedDB database in an origin of the profile. So it
  overwrites nothing. If the browser fails part way, the scope is emptied
  again (cookies cleared, the origins' storage and databases deleted) and the
  op fails saying nothing was restored.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from aiohttp import web

from agentenv.app.acting import acting
from agentenv.app.app_errors import OpError, failure
from agentenv.app.app_requests import (
    acting_caller,
    answer,
    browser_for,
    browser_key,
    op_scope,
    parse,
    reader_key,
    require_control,
    scopes_key,
)
from agentenv.app.browser_data import visited
from agentenv.app.caller import Caller
from agentenv.app.cookies import all_cookies, settable
from agentenv.app.local_storage import on_origin, tab_origins
from agentenv.app.op_browser import Browser
from agentenv.app.profile_permissions import permissions_set
from agentenv.app.profile_scripts import CLEAR_ORIGIN, HELD, READ_ORIGIN, WRITE_ORIGIN
from agentenv.app.session_storage import give_to_front, tabs_session_storage
from agentenv.http import BODY_LIMIT, read_json
from agentenv.log.reader import LogReader
from agentenv.protocol.browser import origin_of
from agentenv.protocol.log import parse_line, scope_of
from agentenv.protocol.profiles import (
    MAX_PROFILE_ORIGINS,
    MAX_PROFILE_PERMISSIONS,
    PROFILE_LIMIT,
    OriginState,
    PermissionSetting,
    Profile,
    ProfileError,
    ProfileLoaded,
    ProfileSaved,
    ProfilesLoad,
    ProfilesSave,
    bounded,
    profile_bytes,
)
from agentenv.relay_link import BrowserError

__all__ = ["load", "profile_op", "save", "scope_record"]

#: A load's body: the document and the few fields around it.
_LOAD_LIMIT = PROFILE_LIMIT + 64 * 1024
_CHUNK = 10000


async def profile_op(request: web.Request, name: str) -> web.Response:
    """profiles/save, profiles/load (control token)."""
    identity = require_control(request)
    who = acting_caller(request, identity)
    if name == "profiles/save":
        asked: ProfilesSave = parse(ProfilesSave, await read_json(request, BODY_LIMIT))
        scope = op_scope(request, identity, asked.scope)
        scopes = request.app[scopes_key]
        only = (scope or scopes.home) if scopes.isolated else None
        browser = browser_for(request, identity, asked.scope)
        # data/reset is every scope's: the home browser keeps its line.
        since = request.app[browser_key].reset_seq
        context = await _own_context(browser)
        if context is None and only is not None:
            raise OpError(
                502,
                f"profiles/save could not learn scope {only!r}'s browser context from the "
                "relay (Target.getBrowserContexts): try again; nothing was saved",
            )
        seen, permissions = await asyncio.get_running_loop().run_in_executor(
            None, scope_record, request.app[reader_key], since, only, context
        )
        if len(permissions) > MAX_PROFILE_PERMISSIONS:
            raise OpError(
                413,
                f"the scope holds more than {MAX_PROFILE_PERMISSIONS} permission settings, "
                "more than a profile keeps: clear them (Browser.resetPermissions) and grant "
                "what the sign-in needs; nothing was saved",
            )
        return answer(name, await save(browser, asked, who, seen, permissions))
    body: ProfilesLoad = parse(ProfilesLoad, await read_json(request, _LOAD_LIMIT))
    browser = browser_for(request, identity, body.scope)
    return answer(name, await load(browser, body, who))


def scope_record(
    reader: LogReader, after: int, scope: str | None, context: str | None
) -> tuple[set[str], list[PermissionSetting]]:
    """What a save reads of the log after line ``after``, in one pass: the
    origins ``scope``'s lines saw (None: every line, a computer of one
    scope), and the permission settings still in force on its ``context``
    (:func:`~agentenv.app.profile_permissions.permissions_set`)."""
    seen: set[str] = set()
    permissions: list[PermissionSetting] = []
    first = after + 1
    while True:
        lines = reader.read_range(first, first + _CHUNK - 1)
        if not lines:
            return seen, permissions
        permissions_set(lines, scope, context, permissions)
        visited([x for x in lines if _in_scope(x, scope)] if scope is not None else lines, seen)
        first += _CHUNK


def _in_scope(raw: bytes, scope: str) -> bool:
    try:
        return scope_of(parse_line(raw)) == scope
    except (ValueError, TypeError):
        return False


def _origins(found: set[str]) -> set[str]:
    """``found`` as origins the way a profile keeps them (no default port)."""
    kept = set()
    for at in found:
        with contextlib.suppress(ValueError):
            kept.add(origin_of(at))
    return kept


def _logged(body: ProfilesSave | ProfilesLoad) -> dict[str, Any]:
    """What the record keeps of a profile op: the scope and the name."""
    return {k: v for k, v in (("scope", body.scope), ("name", body.name)) if v is not None}


async def _own_context(browser: Browser) -> str | None:
    """The scope's own browser context, as the relay answers its clients
    (the default one): a permission command naming it is the scope's."""
    with contextlib.suppress(BrowserError):
        found = (await browser.link.call("Target.getBrowserContexts")).get(
            "defaultBrowserContextId"
        )
        return found if isinstance(found, str) else None
    return None


async def _chromium(browser: Browser) -> int | None:
    with contextlib.suppress(BrowserError, KeyError, ValueError, TypeError):
        product = str((await browser.link.call("Browser.getVersion"))["product"])
        return int(product.split("/", 1)[1].split(".", 1)[0])
    return None


async def _read_origin(browser: Browser, at: str, room: int) -> OriginState:
    try:
        raw = await on_origin(browser, at, READ_ORIGIN, [room])
    except OpError as exc:
        raise OpError(exc.status, f"profiles/save could not read {at}: {exc.message}") from None
    found = orjson.loads(raw) if isinstance(raw, str) else {}
    if "too_large" in found:
        raise OpError(
            413,
            f"{at} holds more than is left of the {PROFILE_LIMIT} bytes a profile holds: "
            "nothing was saved",
        )
    if "unsupported" in found:
        raise OpError(
            422,
            f"{at}'s IndexedDB store {str(found['unsupported'])[:200]!r} holds a value JSON "
            "cannot carry (a Date, Blob, ArrayBuffer, Map or class instance): a profile "
            "keeps JSON values only; nothing was saved",
        )
    try:
        return OriginState.model_validate(found)
    except ValueError:
        raise OpError(502, f"profiles/save read {at} in a shape it does not know") from None


async def save(
    browser: Browser,
    body: ProfilesSave,
    caller: Caller,
    seen: set[str],
    permissions: list[PermissionSetting],
) -> ProfileSaved:
    """The scope's cookies, its origins' storage and its permission
    settings, as one bounded document."""
    async with acting(browser, caller, "profiles/save", None, args=_logged(body)):
        origins = sorted(_origins(await tab_origins(browser) | browser.storage_origins | seen))
        if len(origins) > MAX_PROFILE_ORIGINS:
            raise OpError(
                413,
                f"the scope saw {len(origins)} sites, more than a profile holds "
                f"({MAX_PROFILE_ORIGINS}): save a profile from a scope used for one sign-in",
            )
        cookies = await all_cookies(browser)
        sessions = await tabs_session_storage(browser)
        used = len(orjson.dumps(cookies)) + len(orjson.dumps(sessions))
        states: dict[str, OriginState] = {}
        for at in origins:
            state = await _read_origin(browser, at, max(PROFILE_LIMIT - used, 0))
            if not state.empty:
                states[at] = state
                used += len(orjson.dumps(state.model_dump(mode="json")))
        profile = Profile(
            chromium=await _chromium(browser),
            cookies=cookies,
            origins=states,
            permissions=permissions,
            session_storage=sessions,
        )
    size = len(profile_bytes(profile))
    try:
        bounded(size)
    except ProfileError as exc:
        raise OpError(413, f"{exc}; nothing was saved") from None
    return ProfileSaved(
        name=body.name,
        profile=profile,
        cookies=len(cookies),
        origins=len(states),
        databases=sum(len(s.indexeddb) for s in states.values()),
        permissions=len(profile.permissions),
        session_storage=len(sessions),
        bytes=size,
    )


async def _refuse_unless_fresh(browser: Browser, profile: Profile) -> None:
    cookies = await all_cookies(browser)
    if cookies:
        raise OpError(
            409,
            f"the scope holds {len(cookies)} cookies: a profile loads into a fresh scope "
            "only (scopes/open a new one, or data/reset first); nothing was loaded",
        )
    for at in sorted(profile.origins):
        raw = await on_origin(browser, at, HELD, [])
        held = orjson.loads(raw) if isinstance(raw, str) else {}
        if held.get("local_storage") or held.get("indexeddb"):
            raise OpError(
                409,
                f"the scope already holds storage of {at} ({held.get('local_storage', 0)} "
                f"local storage items, {len(held.get('indexeddb') or [])} IndexedDB "
                "databases): a profile loads into a fresh scope only; nothing was loaded",
            )


async def load(browser: Browser, body: ProfilesLoad, caller: Caller) -> ProfileLoaded:
    """``body.profile`` into a fresh scope: all of it, or nothing."""
    profile = body.profile
    try:
        await _refuse_unless_fresh(browser, profile)
    except BrowserError as exc:
        raise failure(exc) from None
    try:
        async with acting(browser, caller, "profiles/load", None, args=_logged(body)):
            try:
                await _restore(browser, profile)
            except (BrowserError, OpError):
                # Undone within the op: its commands are on the record (a
                # later save reads the permissions' reset there).
                await _empty(browser, profile)
                raise
    except (BrowserError, OpError) as exc:
        cause = failure(exc)
        raise OpError(cause.status, f"profiles/load restored nothing: {cause.message}") from None
    return ProfileLoaded(
        name=body.name,
        cookies=len(profile.cookies),
        origins=len(profile.origins),
        databases=sum(len(s.indexeddb) for s in profile.origins.values()),
        permissions=len(profile.permissions),
        session_storage=len(profile.session_storage),
    )


async def _restore(browser: Browser, profile: Profile) -> None:
    if profile.cookies:
        await browser.link.call(
            "Storage.setCookies", {"cookies": [settable(c) for c in profile.cookies]}
        )
    for at, state in sorted(profile.origins.items()):
        written = orjson.dumps(state.model_dump(mode="json")).decode()
        await on_origin(browser, at, WRITE_ORIGIN, [written])
        browser.storage_origins.add(at)
    # Sent as a client sent them, through the relay's rules: a profile
    # grants nothing an agent of the scope could not.
    for setting in profile.permissions:
        await browser.link.call(setting.method, setting.params)
    await give_to_front(browser, profile.session_storage)  # last: it navigates


async def _empty(browser: Browser, profile: Profile) -> None:
    """Undo a load that failed part way, in a scope that was fresh (best
    effort). Its session storage undoes itself (:func:`give_to_front`)."""
    with contextlib.suppress(BrowserError, OpError):
        await browser.link.call("Storage.clearCookies")
    if profile.permissions:  # the scope's others too: freshness does not see them
        with contextlib.suppress(BrowserError, OpError):
            await browser.link.call("Browser.resetPermissions")
    for at in sorted(profile.origins):
        with contextlib.suppress(BrowserError, OpError):
            await on_origin(browser, at, CLEAR_ORIGIN, [])
