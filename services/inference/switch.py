"""The query encoder's switch to the next embedding model, once that model's index has caught up.

A model change runs both models side by side: the new model's embedding deployment re-embeds
the compacted chunk topic into an index of its own in every retrieval shard, while queries
keep being encoded with (and searched in) the old model. With STREAMRAG_INFERENCE_NEXT_MODEL_*
set, inference loads the next encoder and probes the shards with it every `switch_check_s`:
a shard answers the probe only once the next model's index there holds every document the
other models' indexes hold (services/retrieval/models.py), and says "catching_up" (or
"model_mismatch" before its first record) until then. When every shard answers and the
index is not empty, the engine switches to the next encoder at once, for good. Nothing is
ever searched across two models.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from services.inference.encoding import TextEncoder
from services.inference.engine import SearchBackend
from services.inference.search.gather import GatherResult
from services.inference.search.scatter import SearchQuery
from shared.contract.access import Access

log = logging.getLogger(__name__)
PROBE = "probe"  # any text: the probe asks whether shards answer, not what


def caught_up(result: GatherResult, partitions: int) -> bool:
    """True when every shard answered the probe (none is still catching up, recovering,
    without the model, or silent) and the next model's index holds something: a shard with
    no document of any model answers every model with nothing, so on a fresh or empty mesh
    the switch waits for the next model's first chunks."""
    return (partitions > 0 and len(result.answered) == partitions and not result.partial
            and bool(result.hits))


class Switchable(Protocol):
    def switch_encoder(self, encoder: TextEncoder) -> None: ...


class ModelSwitch:
    def __init__(self, engine: Switchable, search: SearchBackend,
                 load_next: Callable[[], TextEncoder], check_s: float,
                 timeout_s: float) -> None:
        self.engine, self.search, self._load_next = engine, search, load_next
        self.check_s, self.timeout_s = check_s, timeout_s
        self.switched = False
        self.last_errors: dict[int, str] = {}  # what the shards said to the last probe

    async def run(self) -> None:
        """Load the next encoder, probe until its index has caught up, then switch."""
        encoder = await asyncio.to_thread(self._load_next)
        vector = (await asyncio.to_thread(encoder.encode, [PROBE]))[0]
        probe = SearchQuery(vector, encoder.model_id, encoder.dim, top_k=1,
                            access=Access.everything())  # the service's own probe
        log.info("next model %s loaded; queries switch to it once its index has caught up",
                 encoder.model_id)
        while not await self.probe(probe):
            await asyncio.sleep(self.check_s)
        self.engine.switch_encoder(encoder)
        self.switched = True
        log.info("every shard's %s index has caught up: queries now use it", encoder.model_id)

    async def probe(self, query: SearchQuery) -> bool:
        if not self.search.ready:
            return False
        try:
            result = await self.search.search(query, self.timeout_s)
        except Exception as exc:  # a probe that failed is a probe to repeat
            log.warning("probing the %s index failed (%s): trying again", query.model_id,
                        type(exc).__name__)
            return False
        self.last_errors = dict(result.errors)
        return caught_up(result, self.search.partitions)
