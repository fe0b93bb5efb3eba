"""The one way tests wait: poll a condition until it holds, never a fixed sleep."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
WAIT_SECONDS = 10.0


async def eventually(probe: Callable[[], T | Awaitable[T | None] | None], timeout: float = WAIT_SECONDS,
                     what: str = "condition") -> T:
    """Poll ``probe`` (a function, or a coroutine function) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
