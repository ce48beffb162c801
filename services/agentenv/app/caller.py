"""Who an op or MCP call is on the record as (docs/spec.md section 1, "Who is who"). No I/O.

- With users configured, a name is proven by a token and nothing else: an
  agent's call is its token's user (``via: api``, or ``mcp`` with an
  ``AgentEnv-Tool-Call``), and an ``AgentEnv-Role`` it sends is kept as
  ``role`` beside the name, never instead of it.
- The control token's calls are the computer's own (``via: agentenv``,
  ``who: agentenv``), unless they name a role: then the harness drives for an
  agent's role, and the role becomes the name (``via: api``, or ``mcp``).
- Without users configured (a developer's machine), the role names the
  caller, ``default`` without one.
- A person (a user of ``role=human``, who acts through the live view only)
  is ``via: human``, ``who``: their user; no header changes that.
- The relay, asking for an agent's ``AgentEnv.requestHuman``
  (relay/asking.py), calls with the control token, the agent as the role
  and ``AgentEnv-Via: cdp``: ``via: cdp``, ``who``: the agent. Another
  caller's ``AgentEnv-Via`` changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentenv.access import Identity
from agentenv.app.toolcall import ToolCall
from agentenv.protocol.control import Via
from agentenv.settings import AGENTENV_USER

__all__ = ["DEFAULT_ROLE", "Caller", "caller_of"]

DEFAULT_ROLE = "default"


@dataclass(frozen=True)
class Caller:
    via: Via
    who: str
    #: A role named by a caller whose name comes from its token (kept beside ``who``).
    role: str | None = None
    tool: ToolCall | None = None

    @property
    def own(self) -> bool:
        """The computer's own call (the harness acting for no agent)."""
        return self.via == "agentenv"


def caller_of(
    identity: Identity,
    role: str | None,
    tool: ToolCall | None,
    *,
    users: bool,
    relayed: bool = False,
) -> Caller:
    """The caller of a call made as ``identity`` with these headers;
    ``relayed``: the relay asks for an agent's CDP command (``AgentEnv-Via:
    cdp``), taken from the control token naming a role alone."""
    if identity.human:
        return Caller("human", identity.user)
    agent: Via = "mcp" if tool is not None else "api"
    if identity.control and relayed and role is not None and tool is None:
        return Caller("cdp", role)
    if identity.control:
        if role is None:
            return (
                Caller("mcp", AGENTENV_USER, None, tool)
                if tool
                else Caller("agentenv", AGENTENV_USER)
            )
        return Caller(agent, role, None, tool)
    if not users:
        return Caller(agent, role or DEFAULT_ROLE, None, tool)
    return Caller(agent, identity.user, role if role != identity.user else None, tool)
