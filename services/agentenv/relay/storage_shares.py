"""Each scope's share of the browser's storage (issue 22). No I/O.

Chromium bounds storage per origin, with a quota it sizes from the machine:
for a scope other than home (an off-the-record context, whose IndexedDB and
Cache Storage live in the browser process's memory) from the host's memory,
11 GB an origin on the machine the tests run on. So the relay's watcher sets
every origin's quota itself (``Storage.overrideQuotaForOrigin``), from
two budgets:

- an origin's, ``AGENTENV_ORIGIN_STORAGE_BYTES`` (128 MiB);
- a scope's, ``AGENTENV_SCOPE_STORAGE_BYTES`` (256 MiB), summed over every
  origin of every browser context the scope holds: else one agent's pages
  opening twenty origins could hold twenty quotas.

:class:`Shares` keeps the quotas given as reservations, so that within a
scope they never add up past its budget: an origin first seen gets at most
half of what is not yet reserved (so there is always some left for the next
one), and :meth:`Shares.rebalance`, from what each origin uses, gives each
what it uses and shares out half of what is free. A reservation outlives its
pages (what an origin stored stays in its context) until the context goes
(``data/reset``, or Chromium restarting).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Key", "Shares"]

#: An origin of a browser context: (context id, origin).
Key = tuple[str, str]


@dataclass
class Shares:
    """The quotas given, per scope."""

    origin_bytes: int
    scope_bytes: int
    #: scope -> {(context, origin): quota}
    given: dict[str, dict[Key, int]] = field(default_factory=dict)

    def quota(self, scope: str, key: Key) -> int:
        """``key``'s quota: the one given, or a new one (at least 1 byte:
        Chromium reads a quota of 0 as none)."""
        mine = self.given.setdefault(scope, {})
        known = mine.get(key)
        if known is not None:
            return known
        quota = self.origin_bytes
        if self.scope_bytes:
            left = self.scope_bytes - sum(mine.values())
            quota = max(1, min(quota, left // 2))
        mine[key] = quota
        return quota

    def rebalance(self, scope: str, used: dict[Key, int]) -> dict[Key, int]:
        """New quotas from the bytes each origin uses (one not measured
        keeps its quota, as if used up): each origin keeps what it uses and
        gets an even part of half of what is free. The quotas that changed."""
        mine = self.given.get(scope, {})
        if not mine or not self.scope_bytes:
            return {}
        use = {key: used.get(key, quota) for key, quota in mine.items()}
        free = max(0, self.scope_bytes - sum(use.values()))
        each = free // (2 * max(1, len(used.keys() & mine.keys())))
        changed: dict[Key, int] = {}
        for key, quota in mine.items():
            if key not in used:
                continue  # not measured: it keeps its quota
            new = max(1, min(self.origin_bytes, use[key] + each))
            if new != quota:
                mine[key] = new
                changed[key] = new
        return changed

    def reserved(self, scope: str) -> int:
        return sum(self.given.get(scope, {}).values())

    def forget(self) -> None:
        """Every context went (Chromium restarted, or data/reset)."""
        self.given.clear()

    def drop(self, scope: str) -> None:
        """``scope``'s contexts went (it was closed or reset): its quotas
        with them, so a scope opened again under its name starts with none."""
        self.given.pop(scope, None)
