"""Waiting in tests: one deadline-bound poll that names what it waited for when it gives up.

Every wait in the suite goes through `eventually` (or `eventually_async` inside a running
event loop): a condition checked until it holds or a deadline passes, never a bare sleep
that hopes the system got there, never a loop without an end. The deadline only bounds
how long a broken program can stall a test; no assertion depends on how long a wait took.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 120.0  # generous: integration tests share two cores with other work


def eventually(check: Callable[[], T], what: str, timeout_s: float = DEFAULT_TIMEOUT_S,
               interval_s: float = 0.3) -> T:
    """`check()`'s first truthy result; AssertionError naming `what` at the deadline.

    The check runs at least once, and once more after the deadline passes, so a slow
    check never loses its last chance to a sleep."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(_gave_up(what, timeout_s, last))
        time.sleep(interval_s)


async def eventually_async(check: Callable[[], T | Awaitable[T]], what: str,
                           timeout_s: float = 10.0, interval_s: float = 0.01) -> T:
    """`eventually` for code on an event loop: the check may be a coroutine function, and
    the wait yields to the loop (interval 0 yields once per check without sleeping)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        last = await result if inspect.isawaitable(result) else result
        if last:
            return last  # type: ignore[return-value]  # awaited above when it was awaitable
        if time.monotonic() >= deadline:
            raise AssertionError(_gave_up(what, timeout_s, last))
        await asyncio.sleep(interval_s)


def _gave_up(what: str, timeout_s: float, last: object) -> str:
    return f"timed out after {timeout_s:g} s waiting for {what}; last check returned {last!r}"
