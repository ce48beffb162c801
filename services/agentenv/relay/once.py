"""One run of a coroutine for every caller asking while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["once"]

T = TypeVar("T")


async def once(
    running: dict[str, asyncio.Task[T]], key: str, make: Callable[[str], Coroutine[Any, Any, T]]
) -> T:
    """``make(key)``, run once for every caller asking while it runs."""
    task = running.get(key)
    if task is None:
        task = asyncio.create_task(make(key))
        running[key] = task
        task.add_done_callback(lambda _t: running.pop(key, None))
    return await asyncio.shield(task)
