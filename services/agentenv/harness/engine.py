"""The Docker engine the harness talks to, as far as the harness must know it.

The harness reaches what it starts on a Docker engine (computers, the run's
store) at ports the engine publishes on **its own machine's loopback**
(127.0.0.1): nothing is published on an address other machines reach. That
is right when the engine runs on this machine, whichever way the docker SDK
reaches it (``DOCKER_HOST`` unset, a ``unix://`` or ``npipe://`` socket, or
``tcp://`` to a loopback address, as with ``dockerd -H tcp://127.0.0.1:P``),
and on Docker Desktop, which forwards published loopback ports to the host.

An engine on another machine (``DOCKER_HOST=tcp://10.0.0.5:2376``,
``ssh://builder``) publishes on *that* machine's loopback, which this one
cannot dial. The harness does not guess a way around it: it stops before
deploying and says what to do (:func:`engine_problem`).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["HARNESS_LABEL", "engine_problem"]

#: The label on everything the harness makes on an engine (containers,
#: networks, services): what a count of leftovers looks for. Computers carry
#: it as ``1`` (``docker ps --filter label=io.agentenv.harness=1`` lists
#: them), the run's store and its network as ``store``.
HARNESS_LABEL = "io.agentenv.harness"


def _loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def engine_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the harness cannot use the engine ``DOCKER_HOST`` names, or None."""
    where = (os.environ if environ is None else environ).get("DOCKER_HOST", "").strip()
    if not where:
        return None
    parts = urlsplit(where)
    if parts.scheme in ("unix", "npipe"):
        return None
    if parts.scheme in ("tcp", "http", "https") and _loopback(parts.hostname or ""):
        return None
    return (
        f"DOCKER_HOST={parts.scheme}://{parts.hostname or '?'} is an engine on another "
        "machine: what the harness starts there is published on that machine's loopback, "
        "which this one cannot reach. Run agentenv on that machine (or make this one a "
        "swarm manager and use --backend swarm), or use --backend kubernetes with "
        "--store s3://…"
    )
