"""``AgentEnv.requestHuman`` from an agent's CDP connection (issue 44, item 3):
the agent asks a person to step in, as the ``request_human`` op does, and
its command is answered when they hand back.

The handoff lives in the app server (app/handoff.py: the one waiting
request of a scope, the live view's banner, ``/metrics``, the person's
word), so the relay asks it there: ``POST /v1/browser/request_human`` on
the app's own port, with the control token naming the agent
(``AgentEnv-Role``) and the way it came (``AgentEnv-Via: cdp``, which the
app takes from the control token alone). The app writes the entry
(``via: cdp``, ``who``: the agent, ``op: request_human``, its reason and
timeout), exactly as for the op, and the manifest's handoffs read it the
same way. The relay writes one only when the app cannot be asked (the
command refused on the record, saying why).

The command is served beside the connection's others (the agent's client
goes on meanwhile, as a person's work needs the page), and answered
``{word, who, note, entries}``; no word within ``timeout_s``, a request already
waiting in the scope, or anything the op refuses is an error answer
(-32000) with the op's words.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from agentenv.protocol.control import AskHuman
from agentenv.relay.core import ClientState, Step
from agentenv.relay.watcher import Watcher

__all__ = ["SLACK_S", "ask_human"]

#: What the relay waits for the app beyond the request's own timeout.
SLACK_S = 30.0


async def ask_human(
    watcher: Watcher, state: ClientState, step: Step
) -> tuple[dict[str, Any], str | None]:
    """Ask the app for a person on the agent's behalf: the CDP answer, and
    why the app could not be asked (then the relay writes the entry)."""
    settings, http = watcher.settings, watcher.http
    asked = step.control
    assert isinstance(asked, AskHuman)
    if settings.control_token is None and settings.tokens_required:
        why = (
            f"{step.method} needs AGENTENV_CONTROL_TOKEN set on this computer (the relay "
            "asks the app with it); call the request_human op with your own token instead"
        )
        return _error(step, why), why
    body: dict[str, Any] = {"reason": asked.reason, "timeout_s": asked.timeout_s}
    if state.scope is not None:
        body["scope"] = state.scope.name
    headers = {"AgentEnv-Role": state.identity.user, "AgentEnv-Via": "cdp"}
    if settings.control_token is not None:
        headers["Authorization"] = f"Bearer {settings.control_token}"
    url = f"http://127.0.0.1:{settings.app_port}/v1/browser/request_human"
    try:
        async with http.post(
            url,
            data=orjson.dumps(body),
            headers={**headers, "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=asked.timeout_s + SLACK_S),
        ) as answer:
            data = await answer.read()
            status = answer.status
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        why = (
            f"{step.method}: the app server did not answer ({type(exc).__name__}); "
            "ask again when /readyz says ready, or call the request_human op"
        )
        return _error(step, why), why
    try:
        said = orjson.loads(data)
    except orjson.JSONDecodeError:
        said = None
    if status == 200 and isinstance(said, dict):
        result = {k: said.get(k) for k in ("word", "who", "note", "entries")}
        reply: dict[str, Any] = {"id": step.call, "result": result}
        if step.session is not None:
            reply["sessionId"] = step.session
        return reply, None
    message = _message(said) or f"the app server answered {status}"
    return _error(step, f"{step.method}: {message}"), None


def _message(said: Any) -> str | None:
    if isinstance(said, dict) and isinstance(said.get("error"), dict):
        text = said["error"].get("message")
        return text if isinstance(text, str) else None
    return None


def _error(step: Step, why: str) -> dict[str, Any]:
    return step.failed(-32000, why).error_answer()
