"""Embedding agent: micro-batches of chunks.v1 -> chunks.embedded.v1."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from services.embedding.app import app, chunks_topic, dlq, embedded_topic, settings
from services.embedding.vectors import embed_sets
from shared.batching import partition_batches
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.embedder import Encoder
from shared.errors import InvalidInput
from shared.records import ChunkSet

log = logging.getLogger(__name__)
encoder: Encoder | None = None


@app.task
async def warm_up() -> None:
    global encoder
    loaded = await asyncio.to_thread(Encoder, None, settings.device)
    await asyncio.to_thread(loaded.encode, ["warm-up"])
    encoder = loaded
    log.info("encoder %s ready on %s (%s)", loaded.model_id, loaded.device, loaded.dtype)


@app.agent(chunks_topic)
async def embed(stream: Any) -> None:
    async for groups in partition_batches(stream, settings.batch_max_docs,
                                          settings.batch_within_s):
        while encoder is None:
            await asyncio.sleep(0.1)
        sets = []
        for events in groups.values():
            for event in events:
                try:
                    sets.append(decode(ChunkSet, event.value))
                except InvalidInput as exc:
                    await send_dead_letter(dlq, "embedding", exc, event.message)
        started = time.perf_counter()
        embedded = await asyncio.to_thread(embed_sets, encoder, sets, settings.max_batch_tokens)
        n = sum(len(s.chunks) for s in sets)
        if n:
            log.info("embedded %d chunks of %d docs in %.0f ms", n, len(sets),
                     (time.perf_counter() - started) * 1000)
        for out in embedded:
            await embedded_topic.send(key=out.doc_id.encode(), value=encode(out))
