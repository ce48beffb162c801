"""A credential typed into the focused field of a tab (``AgentEnv.fillCredential``,
``credentials/fill``): the check in the relay's isolated world, then
``Input.insertText`` on the relay's own session on that tab, so the text is
on no client's connection and in no entry (the entry of the fill says
``{"withheld": "password"}``; :mod:`agentenv.relay.vault` says why the
relay holds the values, and the rule).

The check and the typing are two commands: a navigation that commits
between them (one already under way when the fill began) could take the
typing into the next document. The agent's own connection sends nothing
meanwhile (its commands go one after another), and the check refuses a
page still loading only when it cannot answer; docs/limits.md names the gap.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import aiohttp

from agentenv.protocol.credentials import CredentialField
from agentenv.relay.probes import Probes
from agentenv.relay.relay_errors import WatcherError
from agentenv.relay.vault import FILL_EXPRESSION, FillRefused, Vault, refusal

__all__ = ["FILL_TIMEOUT_S", "fill"]

#: How long the check and the typing may take, each.
FILL_TIMEOUT_S = 3.0


class _Watcher(Protocol):
    probes: Probes
    vault: Vault

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        session: str | None = None,
        deadline_s: float = 5.0,
    ) -> dict[str, Any]: ...


async def fill(watcher: _Watcher, scope: str, tab: str, name: str, which: CredentialField) -> None:
    """Type ``name``'s ``which`` into ``tab``'s focused field, or raise
    :class:`FillRefused` saying why (never the value)."""
    credential = watcher.vault.get(scope, name)
    if which == "totp" and credential.totp_key is None:
        credential.value(which, 0.0)  # raises the refusal naming what to do
    answer = await watcher.probes.ask(tab, FILL_EXPRESSION, FILL_TIMEOUT_S)
    why = refusal(answer, credential.origin)
    if why is not None:
        raise FillRefused(f"credential {name[:64]!r} not filled: {why}")
    session = await watcher.probes.session(tab)
    if session is None:
        raise FillRefused("the tab did not answer: retry once it has loaded")
    text = credential.value(which, time.time())
    try:
        typed = await watcher.call(
            "Input.insertText", {"text": text}, session=session, deadline_s=FILL_TIMEOUT_S
        )
    except (WatcherError, TimeoutError, aiohttp.ClientError, OSError):
        raise FillRefused("the tab did not take the text in time: retry") from None
    if "error" in typed:
        # Chromium's error names no text (it was the params, not the answer).
        raise FillRefused("Chromium refused to type into the tab: retry once it has loaded")
    watcher.vault.filled(scope, credential, which)
