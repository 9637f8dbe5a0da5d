"""Embedding agent: chunks.v1 -> chunks.embedded.v1 in dynamically sized micro-batches.

Events are read without auto-ack and acked only after their output is on the broker, so
a crash can never skip a batch: the worker stops and its partitions replay from the last
committed offset. Bad records are dead-lettered (and acked) one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from services.embedding.app import app, chunks_topic, dlq, embedded_topic, settings
from services.embedding.batcher import DynamicBatcher
from services.embedding.vectors import embed_sets, longest_chunk
from shared.boundary import Boundary, export_counts, is_fatal
from shared.codec import decode, encode
from shared.embedder import Encoder
from shared.records import ChunkSet, EmbeddedChunkSet

log = logging.getLogger(__name__)
encoder: Encoder | None = None
ready = asyncio.Event()

Pending = tuple[Any, ChunkSet]  # (Faust event, its decoded ChunkSet)
boundary = Boundary("embedding", dlq)
export_counts(app, settings.data_dir)


@app.task
async def warm_up() -> None:
    global encoder
    loaded = await asyncio.to_thread(Encoder, None, settings.device)
    await asyncio.to_thread(loaded.encode, ["warm-up"])
    encoder = loaded
    ready.set()
    log.info("encoder %s ready on %s (%s), batching %s", loaded.model_id, loaded.device,
             loaded.dtype, settings.policy())


@app.agent(chunks_topic)
async def embed(stream: Any) -> None:
    manual = stream.noack()
    inbox: asyncio.Queue[Pending] = asyncio.Queue(settings.inbox_max_docs)
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(intake(manual, inbox))
            group.create_task(batches(manual, inbox))
    except Exception as exc:
        log.exception("embedding failed; stopping the worker so unacked batches replay")
        await app.crash(exc)
        raise


async def intake(stream: Any, inbox: asyncio.Queue[Pending]) -> None:
    async for event in stream.events():
        queued = False
        async with boundary.record(event):
            chunk_set = decode(ChunkSet, event.message.value)
            await inbox.put((event, chunk_set))  # a full inbox holds the consumer back
            queued = True
        if not queued:  # dead-lettered
            await stream.ack(event)


async def batches(stream: Any, inbox: asyncio.Queue[Pending]) -> None:
    await ready.wait()
    batcher: DynamicBatcher[Pending] = DynamicBatcher(settings.policy())
    while True:
        while not inbox.empty() and not batcher.full():  # the rest waits in the bounded inbox
            _add(batcher, inbox.get_nowait())
        due = batcher.due_in()
        if due == 0:
            await flush(stream, batcher)
            continue
        with contextlib.suppress(TimeoutError):
            _add(batcher, await asyncio.wait_for(inbox.get(), due))


def _add(batcher: DynamicBatcher[Pending], pending: Pending) -> None:
    chunk_set = pending[1]
    batcher.add(pending, len(chunk_set.chunks), longest_chunk(chunk_set))


async def flush(stream: Any, batcher: DynamicBatcher[Pending]) -> None:
    assert encoder is not None
    batch = batcher.take()
    # Events from before a rebalance belong to whoever owns the partition now and replay
    # there: skip the work but ack them, as Faust does, or the next rebalance waits on them.
    live = [(ev, cs) for ev, cs in batch.values
            if ev.message.generation_id == app.consumer_generation_id]
    started = time.perf_counter()
    embedded = await _embedded(encoder, live)
    encoded_ms = (time.perf_counter() - started) * 1000
    sent = [await embedded_topic.send(key=out.doc_id.encode(), value=encode(out))
            for out in embedded]
    await asyncio.gather(*sent)  # on the broker before the inputs are acked
    for event, _ in batch.values:
        await stream.ack(event)
    wait = batcher.done(batch)
    log.info("embedded %d docs (%d padded tokens%s) in %.0f ms; wait now %.0f ms", len(live),
             batch.padded_tokens, ", full" if batch.full else "", encoded_ms, wait * 1000)


async def _embedded(ready: Encoder, live: list[Pending]) -> list[EmbeddedChunkSet]:
    """The batch's outputs; if the batch fails, each set alone, dead-lettering the bad ones."""
    try:
        return await asyncio.to_thread(embed_sets, ready, [cs for _, cs in live],
                                       settings.max_batch_tokens)
    except Exception as exc:
        if is_fatal(exc):
            raise
        log.warning("embedding a batch of %d failed (%s); retrying one by one", len(live),
                    type(exc).__name__)
    out: list[EmbeddedChunkSet] = []
    for event, chunk_set in live:
        async with boundary.record(event, count=False):
            out.extend(await asyncio.to_thread(embed_sets, ready, [chunk_set],
                                               settings.max_batch_tokens))
    return out
