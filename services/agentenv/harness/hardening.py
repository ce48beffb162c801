"""How a computer container is run, hardened: the same settings as
``compose.yaml`` (a unit test holds the two together), used by the harness
when it starts computers and by the container tests.

- No capability but SETUID, SETGID and KILL: supervisord starts as root only
  to start each program as its own unprivileged user, and to stop them.
- ``no-new-privileges``, a read-only root file system with tmpfs where the
  programs write (the homes of the two users, the downloads folder, /tmp,
  supervisord's run folder), a memory and a process limit.

The memory budget (issue 22). A tmpfs's pages count against the container's
memory limit, so the tmpfs sizes and the relay's own limit together leave
Chromium and the other programs a known share; no one agent can fill one
and have the kernel kill a program of everyone's:

=====================================  ========  ==============================
what                                   bound     what happens past it
=====================================  ========  ==============================
the container (``MEMORY``)             3 GiB     the kernel kills (renderers
                                                 first: Chromium ranks them so)
Chromium's profile, ``/home/browser``  512 MiB   the home scope's writes fail;
                                                 an origin's storage is bounded
                                                 well before (quota, below)
downloads                              256 MiB   a download fails
``/tmp`` (Chromium's shared memory:    256 MiB   a renderer's allocation fails
``--disable-dev-shm-usage``)
``/dev/shm`` (unused by Chromium)      64 MiB
``/home/agentenv``, ``/run/agentenv``  80 MiB
the relay (RLIMIT_DATA,                640 MiB   the connection being served is
``AGENTENV_RELAY_MEMORY_MB``)                    closed (rule memory)
Chromium, the app server with its      1,264    what is left: 3 GiB less the
Playwright MCPs, the recorder          MiB      rows above
one renderer (a tab; RLIMIT_DATA,      2 GiB     the page's allocation fails (an
``AGENTENV_RENDERER_MEMORY_MB``)                 ArrayBuffer: RangeError)
its V8 heap (``--max-old-space-size``, 512 MiB   the tab's renderer ends, only
``AGENTENV_RENDERER_HEAP_MB``)                   that tab
a scope's Blobs, in the browser        2 GiB     a new Blob is refused; no
process (Chromium's constant)                    switch lowers it
of which the Playwright MCPs           384 MiB   a new MCP session is refused
(``AGENTENV_MCP_SESSIONS``, 4, about             (503; one caller's share past
96 MiB each)                                     its own: 429)
and the warm scopes                    128 MiB   none past 4 (the setting is
(``AGENTENV_WARM_SCOPES``, 2, about              refused at start)
30 MiB each)
and the ``/playwright`` servers        240 MiB   a new connection is refused
(``AGENTENV_PLAYWRIGHT_SERVERS``, 2,             (503; one caller's share past
about 120 MiB each)                              its own: 429)
=====================================  ========  ==============================

Past the container's limit the kernel kills the process with the highest
score, its memory plus its ``oom_score_adj`` in thousandths of the limit:
renderers are raised to 1000 (``launch/renderers.sh``), so a tab, the
largest, goes first, and a renderer's death frees the Blobs it held; then
the app and its Playwright MCPs, the recorder and the relay
(:data:`OOM_SCORE_ADJ`); Chromium's browser process stays at 0, last.

Inside Chromium, an origin's storage (IndexedDB, Cache Storage, OPFS) is
held to ``AGENTENV_ORIGIN_STORAGE_BYTES`` and a scope's to
``AGENTENV_SCOPE_STORAGE_BYTES`` by the relay's watcher
(:mod:`agentenv.relay.storage_shares`): a scope other than home is an
off-the-record context whose storage lives in the browser process's memory,
with a quota Chromium computes from the host's memory, not the container's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "CAPABILITIES",
    "LEFT_FOR_PROGRAMS_MB",
    "MCP_SHARE_MB",
    "MEMORY",
    "OOM_SCORE_ADJ",
    "PIDS",
    "PLAYWRIGHT_MCP_MB",
    "PLAYWRIGHT_SERVERS_SHARE_MB",
    "PLAYWRIGHT_SERVER_MB",
    "RELAY_MEMORY_MB",
    "RENDERER_HEAP_MB",
    "RENDERER_MEMORY_MB",
    "SERVICE_UID",
    "SHM",
    "TMPFS",
    "WARM_SHARE_MB",
    "docker_kwargs",
    "size_bytes",
    "writable_by_the_computer",
]

CAPABILITIES = ("SETUID", "SETGID", "KILL")
#: The uid the relay, app server and recorder run as (they write recordings).
SERVICE_UID = 1000
TMPFS = {
    "/tmp": "mode=1777,size=256m",
    "/run/agentenv": "mode=0755,size=16m",
    "/home/agentenv": "uid=1000,gid=1000,mode=0700,size=64m",
    "/home/browser": "uid=1001,gid=1001,mode=0700,size=512m",
    "/var/lib/agentenv/downloads": "uid=1001,gid=1002,mode=2770,size=256m",
}
MEMORY = "3g"
#: Chromium keeps its shared memory in /tmp (``--disable-dev-shm-usage``).
SHM = "64m"
#: The relay's own limit (images/browser/launch/service.sh's default).
RELAY_MEMORY_MB = 640
#: What the budget leaves at least for Chromium and the other programs.
LEFT_FOR_PROGRAMS_MB = 1024
#: One renderer's (a tab's) memory, RLIMIT_DATA, and its V8 heap
#: (images/browser/launch/chromium.sh's defaults; issue 40).
#: At 1 GiB a renderer could not hand an agent an 80 MB string by value
#: (its serialization's copies passed the limit and the tab crashed). The
#: heap stays at 512 MiB: with a scope's 2 GiB of Blobs in the browser, a
#: 1 GiB heap took the container past 3 GiB before V8 ended the tab, and the
#: kernel's kills ran on to the browser (renderers, the app, the recorder,
#: then it: the Blobs die with their renderer, but not at once).
RENDERER_MEMORY_MB = 2048
RENDERER_HEAP_MB = 512
#: Each program's oom_score_adj (images/browser/conf.d): past the container's
#: limit the kernel kills a tab (1000) first, then these, the browser (0) last.
OOM_SCORE_ADJ = {"app": 800, "recorder": 700, "relay": 600}
#: One Playwright MCP (its Node process and the Python that starts it), as
#: the container's cgroup counts it: four took an idle computer from 254 to
#: 628 MiB (2026-12-04, in the image; 131 MiB of RSS each, some shared).
PLAYWRIGHT_MCP_MB = 96
#: What of LEFT_FOR_PROGRAMS_MB every Playwright MCP together may take
#: (``AGENTENV_MCP_SESSIONS`` of them); the rest is Chromium's and the servers'.
MCP_SHARE_MB = 400
#: One ``/playwright`` server (its Node process and the bridge to the relay),
#: PSS: 116 MiB each with a context and a page open (2026-12-07, in the image).
PLAYWRIGHT_SERVER_MB = 120
#: What of LEFT_FOR_PROGRAMS_MB the ``/playwright`` servers together may take
#: (``AGENTENV_PLAYWRIGHT_SERVERS`` of them).
PLAYWRIGHT_SERVERS_SHARE_MB = 240
#: What of LEFT_FOR_PROGRAMS_MB warm scopes together may take (each about
#: ``settings.WARM_SCOPE_MB``, at most ``settings.WARM_SCOPES_MAX``, of them:
#: ``AGENTENV_WARM_SCOPES``); a unit test holds the sum.
WARM_SHARE_MB = 128
PIDS = 2048


def size_bytes(size: str) -> int:
    """A size as Docker writes it (``64m``, ``3g``) in bytes."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    unit = units.get(size[-1:].lower())
    return int(size[:-1]) * unit if unit is not None else int(size)


def docker_kwargs() -> dict[str, Any]:
    """Keyword arguments of the docker SDK's ``containers.run`` for a hardened computer."""
    return {
        "shm_size": SHM,
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
