"""A person's segments in ``network.har`` (issue 44): which requests a person
sent through the live view, not the agent. No I/O.

At the recording's end, with its whole slice of the log, each entry of the
whole ``network.har`` is judged by its tab: the latest act on that tab that
began before the request started (an agent's own act, or a person's
``via: human`` act, as :func:`~agentenv.protocol.log.agent_act` and
:func:`~agentenv.protocol.log.person_act` say) decides. When it is a
person's, the entry says so in HAR's custom fields: ``_by: "human"`` and
``_who``, their user. Entries after an agent's act, or on a tab no one has
acted on, are left as they are (the agent's, or the page's own). The parts
uploaded while recording (``network/NNNN.har``) are not marked: they are
written before the log says who acted.
"""

from __future__ import annotations

import bisect
from typing import Any

import orjson

from agentenv.log.lines import seconds_of
from agentenv.protocol.log import agent_act, person_act

__all__ = ["mark_people"]


def mark_people(entries: list[dict[str, Any]], lines: list[bytes]) -> int:
    """Mark ``entries`` (HAR entries, changed in place) a person sent, by the
    log ``lines`` (as written); how many were marked."""
    acts: dict[str, list[tuple[float, str | None]]] = {}
    for raw in lines:
        if b'"action"' not in raw:
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(line, dict):
            continue
        person = person_act(line)
        act = agent_act(line) or person
        tab, at = (act or {}).get("tab"), seconds_of(line.get("at"))
        if act is None or not isinstance(tab, str) or at is None:
            continue
        # A person's act: their user; an agent's: None (its segment, unmarked).
        who = str(person.get("who") or "?") if person is not None else None
        acts.setdefault(tab, []).append((at, who))
    times: dict[str, list[float]] = {}
    for tab, found in acts.items():
        found.sort(key=lambda x: x[0])
        times[tab] = [at for at, _ in found]
    marked = 0
    for entry in entries:
        tab = str(entry.get("pageref"))
        started = seconds_of(entry.get("startedDateTime"))
        if tab not in acts or started is None:
            continue
        index = bisect.bisect_right(times[tab], started) - 1
        who = acts[tab][index][1] if index >= 0 else None
        if who is not None:
            entry["_by"], entry["_who"] = "human", who
            marked += 1
    return marked
