"""Start a plain aiokafka client, waiting out a broker that is restarting.

A worker's own clients (redaction's chain-end reader after a rebalance, bring-up's admin)
start while the broker may be down for seconds: a broker killed and restarted by its
supervisor, a rolling restart. Failing there stops the worker, which takes inference's
query path down with it in the one-process mesh, for longer than the broker was gone. So
a start that cannot reach the broker is retried, with a fresh client each time (a client
whose start failed half-way is not reused), until `wait_s` has passed; then it raises
InfrastructureError naming the broker, and the worker exits to be restarted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from aiokafka.errors import KafkaConnectionError

from shared.errors import InfrastructureError

log = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.25
LONGEST_PAUSE_S = 2.0


class Startable(Protocol):
    def start(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=Startable)


async def started(make: Callable[[], C], close: Callable[[C], Awaitable[object]],
                  bootstrap: str, wait_s: float, what: str) -> C:
    """A started client from `make()`, retried while the broker refuses connections."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    pause, tries = FIRST_PAUSE_S, 0
    while True:
        client = make()
        try:
            await client.start()
            if tries:
                log.info("%s: broker %s reachable again after %d tries", what, bootstrap,
                         tries)
            return client
        except KafkaConnectionError as exc:
            await close(client)
            tries += 1
            left = deadline - loop.time()
            if left <= 0:
                msg = f"{what}: broker {bootstrap} not reachable after {wait_s:.0f}s"
                raise InfrastructureError(msg) from exc
            if tries == 1:
                log.warning("%s: broker %s not reachable; retrying for up to %.0fs",
                            what, bootstrap, left)
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, LONGEST_PAUSE_S)
