"""An idle-aware fetch wait for every Kafka consumer of a process, in either bring-up.

The embedded broker never answers a waiting fetch early, so a consumer's fetch wait is a
trade: short waits make every hop fast and cost idle CPU (each empty fetch is work for the
broker and for the client, roughly in proportion to the partitions it names), long waits
are cheap and slow. The wait follows an activity signal instead: the configured (short)
wait while the mesh works, and `idle_ms` once nothing was fetched or produced for
`idle_after_s`. In one process all hops share the signal. With one process per service,
the processes of one machine share it through a file (`activity_file`): a process that
sees traffic touches it (at most every TOUCH_EVERY_S), and every process reads its time
before each fetch, so a record arriving anywhere shortens every process's next fetch.
Either way the first record after a quiet spell pays up to one idle wait on its first hop
and at most what is left of one more on a later hop (the fetches already waiting); while
traffic flows every hop sees the short wait. Measured by scripts/bench_latency. Real
Kafka answers a waiting fetch when data arrives, so there a long wait costs nothing.

`install()` reaches into aiokafka 0.14's Fetcher (`_get_actions_per_node`, where each
fetch request is built from `_fetch_max_wait_ms`; `_proc_fetch_request`, which returns
True when a fetch brought records) and wraps `AIOKafkaProducer.send`. No upstream issue:
aiokafka does what Kafka's protocol asks, and the wait is a trade the embedded broker
forces. Removable when the embedded broker answers a waiting fetch as soon as data
arrives, or where only Apache Kafka is used (set idle_fetch_max_wait_ms to 0 there).

`set_faust_wait()` makes the wait of Faust's own consumer a setting: faust-streaming
0.15.3's aiokafka driver builds it with fetch_max_wait_ms=1500 and offers no setting for
it (no upstream issue found). It wraps the private
`AIOKafkaConsumerThread._create_worker_consumer`; removable when Faust exposes the value
as an app setting.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.kafka.seam import replace

TOUCH_EVERY_S = 0.5  # how often a busy process refreshes the shared activity file


class SharedActivity:
    """When any process of the machine's mesh last saw traffic: a file's modification time
    (wall clock, as file times are)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path, self.clock = path, clock
        self.touched = float("-inf")

    def touch(self) -> None:
        now = self.clock()
        if now - self.touched < TOUCH_EVERY_S:
            return
        self.touched = now
        try:
            self.path.touch()
            os.utime(self.path, (now, now))
        except OSError:
            pass  # a missing run dir only costs the other processes a long wait

    def age_s(self) -> float:
        try:
            return self.clock() - self.path.stat().st_mtime
        except OSError:
            return float("inf")


class IdleAwareWait:
    """The fetch wait to use now, given when this process (or, with `shared`, any process
    of the mesh) last saw traffic."""

    def __init__(self, idle_ms: int, idle_after_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 shared: SharedActivity | None = None) -> None:
        self.idle_ms, self.idle_after_s, self.clock = idle_ms, idle_after_s, clock
        self.shared = shared
        self.last_traffic = clock()  # starting up counts as traffic

    def traffic(self) -> None:
        self.last_traffic = self.clock()
        if self.shared is not None:
            self.shared.touch()

    def wait_ms(self, configured_ms: int) -> int:
        if self.clock() - self.last_traffic < self.idle_after_s:
            return configured_ms
        if self.shared is not None and self.shared.age_s() < self.idle_after_s:
            return configured_ms
        return max(configured_ms, self.idle_ms)


policy: IdleAwareWait | None = None


def install(idle_ms: int, idle_after_s: float,
            activity_file: Path | None = None) -> IdleAwareWait:
    """Make every consumer of this process wait idle-aware; the policy is process-wide."""
    global policy
    shared = SharedActivity(activity_file) if activity_file is not None else None
    if policy is not None:
        policy.idle_ms, policy.idle_after_s = idle_ms, idle_after_s
        policy.shared = shared or policy.shared
        return policy
    policy = IdleAwareWait(idle_ms, idle_after_s, shared=shared)
    active = policy

    from aiokafka import AIOKafkaProducer
    from aiokafka.consumer.fetcher import Fetcher

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

    actions = replace(Fetcher, "_get_actions_per_node", get_actions_per_node)
    fetch = replace(Fetcher, "_proc_fetch_request", proc_fetch_request)
    send = replace(AIOKafkaProducer, "send", producer_send)
    return policy


_faust_wait_ms: int | None = None


def set_faust_wait(wait_ms: int) -> None:
    """Make every Faust consumer of this process wait at most `wait_ms` per fetch.

    aiokafka reads the value when the consumer starts, so setting it after creation works;
    a broker that does not answer a waiting fetch early (the embedded one) would otherwise
    add up to Faust's 1.5 s per hop.
    """
    global _faust_wait_ms
    if _faust_wait_ms is None:
        from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

        def create(self: Any, transport: Any) -> Any:
            consumer = original(self, transport)
            consumer._fetch_max_wait_ms = _faust_wait_ms
            return consumer

        original = replace(AIOKafkaConsumerThread, "_create_worker_consumer", create)
    _faust_wait_ms = wait_ms
