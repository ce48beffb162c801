"""How a computer container is run, hardened: the same settings as
``compose.yaml`` (a unit test holds the two together), used by the harness
when it starts computers and by the container tests.

- No capability but SETUID, SETGID and KILL: supervisord starts as root only
  to start each program as its own unprivileged user, and to stop them.
- ``no-new-privileges``, a read-only root file system with tmpfs where the
  programs write (the homes of the two users, the downloads folder, /tmp,
  supervisord's run folder), a memory and a process limit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "CAPABILITIES",
    "MEMORY",
    "PIDS",
    "SERVICE_UID",
    "TMPFS",
    "docker_kwargs",
    "writable_by_the_computer",
]

CAPABILITIES = ("SETUID", "SETGID", "KILL")
#: The uid the relay, app server and recorder run as (they write recordings).
SERVICE_UID = 1000
TMPFS = {
    "/tmp": "mode=1777,size=512m",
    "/run/agentenv": "mode=0755,size=16m",
    "/home/agentenv": "uid=1000,gid=1000,mode=0700,size=64m",
    "/home/browser": "uid=1001,gid=1001,mode=0700,size=1g",
    "/var/lib/agentenv/downloads": "uid=1001,gid=1002,mode=2770,size=1g",
}
MEMORY = "3g"
PIDS = 2048


def docker_kwargs() -> dict[str, Any]:
    """Keyword arguments of the docker SDK's ``containers.run`` for a hardened computer."""
    return {
        "shm_size": "1g",
        "cap_drop": ["ALL"],
        "cap_add": list(CAPABILITIES),
        "security_opt": ["no-new-privileges:true"],
        "read_only": True,
        "tmpfs": dict(TMPFS),
        "mem_limit": MEMORY,
        "pids_limit": PIDS,
    }


def writable_by_the_computer(folder: Path) -> None:
    """Let a computer on this machine write ``folder`` (mounted at the same path):
    its recorder runs as :data:`SERVICE_UID`, not as the harness's user."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(folder, SERVICE_UID, -1)
    else:
        folder.chmod(0o777)
