"""The permission settings a profile keeps, read from the log (docs/spec.md
section 3, "Profiles"). No I/O.

Chromium cannot list a browser context's permission overrides, but every one
was made by a command on the record: ``Browser.grantPermissions`` or
``Browser.setPermission``, sent by a client of the scope through the relay.
So a save replays the scope's lines and keeps, in order, each such command
that succeeded since the scope's permissions were last cleared, and a load
sends them again into the new scope (:mod:`agentenv.app.profile_ops`).

What clears them: ``Browser.resetPermissions`` (Playwright's
``clear_permissions``), ``scopes/reset`` of the scope (a new context) and
``data/reset`` (its reset line). Only commands on the scope's own context
count: with no ``browserContextId`` (the relay's rule for a scope) or naming
the scope's context (Playwright names its default context's). One naming
another acts in a context a client made for itself, whose cookies and
storage a profile does not keep either. A kept command's context is left
out: a load sends it into the scope it loads into.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from agentenv.protocol.log import action_of, parse_line, scope_of
from agentenv.protocol.profiles import (
    MAX_PROFILE_PERMISSIONS,
    PERMISSION_METHODS,
    PermissionSetting,
)

__all__ = ["permissions_set"]

#: What clears a scope's permissions, besides data/reset's reset line.
_CLEARS = "Browser.resetPermissions"


def permissions_set(
    lines: Iterable[bytes],
    scope: str | None,
    context: str | None,
    kept: list[PermissionSetting] | None = None,
) -> list[PermissionSetting]:
    """The permission commands of ``scope``'s lines (None: every line, a
    computer of one scope) on its ``context`` still in force at their end,
    oldest first, added to ``kept`` (past :data:`MAX_PROFILE_PERMISSIONS`,
    only the latest one more than it: the save refuses so many). A line this
    cannot read is passed over, and so is a command whose params the log
    cut or withheld (it cannot be sent again as it was)."""
    kept = [] if kept is None else kept
    for raw in lines:
        try:
            line = parse_line(raw)
        except (ValueError, TypeError):
            continue
        reset = line.get("reset")
        if isinstance(reset, dict) and reset.get("reason") == "data/reset":
            kept.clear()
            continue
        action = action_of(line)
        if action is None or action.get("ok") is not True:
            continue
        args = action.get("args")
        if action.get("op") == "scopes/reset" and (
            scope is None or (isinstance(args, dict) and args.get("scope") == scope)
        ):
            kept.clear()
            continue
        if scope is not None and scope_of(line) != scope:
            continue
        method, params = action.get("method"), action.get("params")
        if not isinstance(params, dict) or params.get("browserContextId", context) != context:
            continue
        if method == _CLEARS:
            kept.clear()
        elif method in PERMISSION_METHODS:
            sent = {k: v for k, v in params.items() if k != "browserContextId"}
            try:
                kept.append(PermissionSetting.model_validate({"method": method, "params": sent}))
            except ValidationError:
                continue  # params the log cut (past its bound) or withheld
            if len(kept) > 2 * (MAX_PROFILE_PERMISSIONS + 1):
                del kept[: -(MAX_PROFILE_PERMISSIONS + 1)]  # enough to say there are too many
    return kept
