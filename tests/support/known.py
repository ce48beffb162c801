"""A :class:`agentenv.relay.known.Known` made of facts, as the watcher learns them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentenv.relay.known import InContext, Known, PageOfTab, TargetSeen


class _Warm:
    def __init__(self, withheld: Callable[[object], bool]) -> None:
        self._withheld = withheld

    def withheld(self, context: object) -> bool:
        return self._withheld(context)


def known(
    contexts: Mapping[str, str] | None = None,
    kinds: Mapping[str, tuple[str, str]] | None = None,
    pages: Mapping[str, str] | None = None,
    withheld: Callable[[object], bool] | None = None,
) -> Known:
    """Targets' contexts, (type, url) and tab pages learned; ``withheld``: the warm contexts."""
    found = Known() if withheld is None else Known(warm=_Warm(withheld))
    for target, (kind, url) in (kinds or {}).items():
        found.learn(TargetSeen(target, kind, url))
    for target, context in (contexts or {}).items():
        found.learn(InContext(target, context))
    for tab, page in (pages or {}).items():
        found.learn(PageOfTab(tab, page))
    return found
