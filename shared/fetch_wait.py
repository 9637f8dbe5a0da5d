"""An idle-aware fetch wait for every Kafka consumer of a process (one-process mode).

The embedded broker never answers a waiting fetch early, so a consumer's fetch wait is a
trade: short waits make every hop fast and cost idle CPU (each empty fetch is work for the
broker and for the client, roughly in proportion to the partitions it names), long waits
are cheap and slow. In one process all hops share one activity signal, so the wait can
follow it: the configured (short) wait while the process works, and `idle_ms` once
nothing was fetched or produced for `idle_after_s`. The first record after a quiet spell
pays up to one idle wait on its first hop; every later hop, and everything while traffic
flows, sees the short wait. Measured by scripts/bench_latency.

`install()` reaches into aiokafka 0.14's Fetcher (`_get_actions_per_node`, where each
fetch request is built from `_fetch_max_wait_ms`; `_proc_fetch_request`, which returns
True when a fetch brought records) and wraps `AIOKafkaProducer.send`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class IdleAwareWait:
    """The fetch wait to use now, given when the process last saw traffic."""

    def __init__(self, idle_ms: int, idle_after_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_ms, self.idle_after_s, self.clock = idle_ms, idle_after_s, clock
        self.last_traffic = clock()  # starting up counts as traffic

    def traffic(self) -> None:
        self.last_traffic = self.clock()

    def wait_ms(self, configured_ms: int) -> int:
        if self.clock() - self.last_traffic < self.idle_after_s:
            return configured_ms
        return max(configured_ms, self.idle_ms)


policy: IdleAwareWait | None = None


def install(idle_ms: int, idle_after_s: float) -> IdleAwareWait:
    """Make every consumer of this process wait idle-aware; the policy is process-wide."""
    global policy
    if policy is not None:
        policy.idle_ms, policy.idle_after_s = idle_ms, idle_after_s
        return policy
    policy = IdleAwareWait(idle_ms, idle_after_s)
    active = policy

    from aiokafka import AIOKafkaProducer
    from aiokafka.consumer.fetcher import Fetcher

    actions = Fetcher._get_actions_per_node
    fetch = Fetcher._proc_fetch_request
    send = AIOKafkaProducer.send

    def get_actions_per_node(self: Any, assignment: Any) -> Any:
        configured = self.__dict__.setdefault("_configured_wait_ms", self._fetch_max_wait_ms)
        self._fetch_max_wait_ms = active.wait_ms(configured)
        return actions(self, assignment)

    async def proc_fetch_request(self: Any, *args: Any, **kwargs: Any) -> Any:
        got_records = await fetch(self, *args, **kwargs)
        if got_records:
            active.traffic()
        return got_records

    async def producer_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        active.traffic()  # a record for a consumer of this process, most likely
        return await send(self, *args, **kwargs)

    Fetcher._get_actions_per_node = get_actions_per_node
    Fetcher._proc_fetch_request = proc_fetch_request
    AIOKafkaProducer.send = producer_send
    return policy
