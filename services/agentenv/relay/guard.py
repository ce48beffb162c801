"""The guard: CDP commands the relay refuses to forward (SPEC.md section 2).

Each rule has a name, written in the entry's ``guard`` when it acts:

- ``blocked``: the command gets a CDP error answer with its own ``id`` (and
  ``sessionId``); the connection stays open.
- ``withheld``: the command is not sent, and the relay answers it with an
  empty success. Used for ``Browser.setDownloadBehavior`` outside the
  downloads folder: Playwright's ``connect_over_cdp`` sends one with a folder
  of the client's machine and fails to connect if it is refused, while the
  computer keeps saving downloads into its own folder (set by the relay's
  watcher when it connects).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["GUARD_ERROR_CODE", "RULES", "Verdict", "check", "check_url"]

GUARD_ERROR_CODE = -32000

_DROPPED = {ord("\t"): None, ord("\n"): None, ord("\r"): None}
_LOCAL_SCHEMES = ("file:", "chrome:", "chrome-extension:", "chrome-untrusted:", "devtools:")


@dataclass(frozen=True)
class Verdict:
    rule: str
    message: str
    action: str = "blocked"

    def as_entry(self) -> dict[str, str]:
        return {"rule": self.rule, "action": self.action}


def _local_url(url: str) -> bool:
    # As Chromium's URL parser does: tabs and newlines anywhere go, and so do
    # leading and trailing control characters and spaces.
    u = url.translate(_DROPPED).strip("".join(map(chr, range(33)))).lower()
    while u.startswith("view-source:"):
        u = u[len("view-source:") :].strip()
    return u.startswith(_LOCAL_SCHEMES)


def check_url(url: object) -> Verdict | None:
    """The ``local-url`` rule for a URL an agent asks to open."""
    if isinstance(url, str) and _local_url(url):
        return Verdict(
            "local-url",
            "blocked by agentenv guard local-url: file:, chrome:, chrome-extension: and "
            "view-source: of those are not reachable; navigate to an http(s) URL",
        )
    return None


def _browser_close(params: Mapping[str, Any], downloads: str) -> Verdict | None:
    return Verdict(
        "browser-close",
        "blocked by agentenv guard browser-close: the computer's browser stays up; "
        "close tabs with Target.closeTarget instead",
    )


def _browser_crash(params: Mapping[str, Any], downloads: str) -> Verdict | None:
    return Verdict("browser-crash", "blocked by agentenv guard browser-crash")


def _navigation(params: Mapping[str, Any], downloads: str) -> Verdict | None:
    return check_url(params.get("url"))


def _wrapper(params: Mapping[str, Any], downloads: str) -> Verdict | None:
    return Verdict(
        "unwrapped-only",
        "blocked by agentenv guard unwrapped-only: commands sent inside another (or a CDP "
        "channel for the page) would pass the record and the guard; use flattened sessions "
        "(Target.attachToTarget with flatten: true)",
    )


def _attach(params: Mapping[str, Any], downloads: str) -> Verdict | None:
    return None if params.get("flatten") is True else _wrapper(params, downloads)


def _download_folder(params: Mapping[str, Any], downloads: str) -> Verdict | None:
    behavior = params.get("behavior")
    path = params.get("downloadPath")
    if behavior in ("deny", "default") and path is None:
        return None
    if isinstance(path, str) and downloads:
        real = os.path.normpath(path)
        root = os.path.normpath(downloads)
        if real == root or real.startswith(root + os.sep):
            return None
    return Verdict(
        "download-folder",
        f"withheld by agentenv guard download-folder: downloads go to {downloads} only",
        action="withheld",
    )


Rule = Callable[[Mapping[str, Any], str], Verdict | None]

#: method -> rule. Names: browser-close, browser-crash, local-url,
#: download-folder, unwrapped-only.
RULES: dict[str, Rule] = {
    "Browser.close": _browser_close,
    "Browser.crash": _browser_crash,
    "Browser.crashGpuProcess": _browser_crash,
    "Page.navigate": _navigation,
    "Target.createTarget": _navigation,
    "Browser.setDownloadBehavior": _download_folder,
    "Target.sendMessageToTarget": _wrapper,
    "Target.exposeDevToolsProtocol": _wrapper,
    "Target.attachToTarget": _attach,
    "Page.setDownloadBehavior": _download_folder,
}


def check(method: str, params: Mapping[str, Any] | None, downloads: str) -> Verdict | None:
    """The guard's verdict on a command, or None to let it through."""
    rule = RULES.get(method)
    if rule is None and method.startswith("Browser.crash"):
        rule = _browser_crash
    if rule is None:
        return None
    return rule(params or {}, downloads)
