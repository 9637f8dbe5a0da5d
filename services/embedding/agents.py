"""Embedding agent: chunks.v1 -> chunks.embedded.v1 in batches cut whenever the encoder is free.

Decoded sets queue in a shared.batching Batcher (bounded: a full queue holds the consumer
back); its loop cuts the next batch the moment the previous one is on the broker, so
batches are one set when traffic is light and grow under load, within
max_batch_tokens / batch_max_docs.

Events are taken from the checkpoint unprocessed and handed back to it (`checkpoint.done`)
only once their output is on the broker, so a crash can never skip a batch: the worker
stops and its partitions replay from the last committed offset. Bad records are
dead-lettered (and done) one by one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import faust

from services.embedding.app import declare
from services.embedding.settings import EmbeddingSettings
from services.embedding.vectors import embed_sets, longest_chunk
from shared.batching.batcher import Batcher
from shared.batching.padding import padded_tokens
from shared.contract import sizes
from shared.contract.codec import decode, encode
from shared.contract.records import ChunkSet, EmbeddedChunkSet
from shared.contract.topics import embedded_key
from shared.encoder.runtime import SentenceEncoder, load_encoder
from shared.kafka import checkpoint
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import metrics
from shared.worker.boundary import Boundary, exit_now, export_counts, is_fatal
from shared.worker.topology import Topology

log = logging.getLogger(__name__)
encoder: SentenceEncoder | None = None
ready: asyncio.Event  # set once the encoder is loaded (made by build: an event of its loop)

Pending = tuple[Any, ChunkSet]  # (Faust event, its decoded ChunkSet)
# What build() wired this module's agent to: one topology per process.
app: faust.App
settings: EmbeddingSettings
kafka: KafkaSettings
embedded_topic: Any
dlq: Any
boundary: Boundary
embed: Any  # the Faust agent


def build(on: faust.App, embedding: EmbeddingSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Register the embedding agent and its encoder's warm-up on `on`."""
    global app, settings, kafka, embedded_topic, dlq, boundary, embed, ready
    app, settings, kafka = on, embedding, kafka_settings
    t = declare(app)
    embedded_topic, dlq = t.embedded, t.dlq
    ready = asyncio.Event()
    boundary = Boundary("embedding", dlq)
    export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                  metrics_port=settings.metrics_port)
    app.task(warm_up)
    embed = app.agent(t.chunks, name=f"{__name__}.embed")(embed_sets_of)
    return Topology("embedding", app, settings, {"embed": embed})


async def warm_up() -> None:
    global encoder
    loaded = await asyncio.to_thread(load_encoder, settings.encoder_runtime, settings.device,
                                     settings.encoder_threads, settings.model_cache_dir,
                                     settings.model_path, settings.encoder_model_id(),
                                     workers=settings.encoder_workers)
    await asyncio.to_thread(loaded.encode, ["warm-up"])
    encoder = loaded
    ready.set()
    log.info("encoder %s ready on %s (%s), batching %s", loaded.model_id, loaded.device,
             loaded.runtime, settings.limits())


async def embed_sets_of(stream: Any) -> None:
    """chunks.v1 -> chunks.embedded.v1."""
    async def run(batch: Sequence[Pending]) -> list[None]:
        return await flush(batch)

    # propagate: a batch that fails past the per-set fallback stops the worker (replay).
    batcher: Batcher[Pending, None] = Batcher("embed", run, settings.limits(),
                                              settings.inbox_max_docs, propagate=True)
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(intake(stream, batcher))
            group.create_task(serve(batcher))
    except Exception as exc:
        # Not app.crash(): Faust's stop would wait forever for the events queued here,
        # never done ("Wait for streams..."), the process alive and supervision none the
        # wiser. Nothing queued was done, so nothing of it is committed either way.
        log.exception("embedding failed; exiting so the batches in hand replay")
        exit_now(exc)
        raise


async def intake(stream: Any, batcher: Batcher[Pending, None]) -> None:
    async for event in checkpoint.taken(stream):
        queued = False
        async with boundary.record(event):
            chunk_set = decode(ChunkSet, event.message.value)
            spans.annotate(doc_id=chunk_set.doc_id, version=chunk_set.version)
            # A full queue holds the consumer back.
            await batcher.put((event, chunk_set), len(chunk_set.chunks), longest_chunk(chunk_set))
            queued = True
        if not queued:  # dead-lettered
            checkpoint.done(event)


async def serve(batcher: Batcher[Pending, None]) -> None:
    await ready.wait()
    await batcher.serve()


async def flush(batch: Sequence[Pending]) -> list[None]:
    """Embed one batch, put its outputs on the broker, then hand its inputs to the
    checkpoint."""
    assert encoder is not None
    # Events from before a rebalance belong to whoever owns the partition now and replay
    # there: skip the work but mark them done, as Faust does, or the next rebalance waits
    # on them. Marking them commits nothing: the checkpoint holds a revoked partition until
    # its next seek, and that seek forgets every ack from before it.
    live = [(ev, cs) for ev, cs in batch
            if ev.message.generation_id == app.consumer_generation_id]
    started = time.perf_counter()
    embedded = await _embedded(encoder, live)
    encoded_ms = (time.perf_counter() - started) * 1000
    with spans.batch(boundary.stage, [ev.message for ev, _ in live]):
        sent = await send_all(embedded, {(cs.doc_id, cs.version): ev for ev, cs in live})
    await asyncio.gather(*sent)  # on the broker before the inputs are done
    for event, _ in batch:
        checkpoint.done(event)
    metrics.batch(boundary.stage, len(batch))
    sets = [cs for _, cs in batch]
    size = padded_tokens(sum(len(cs.chunks) for cs in sets),
                         max(longest_chunk(cs) for cs in sets))
    log.info("embedded %d docs (%d padded tokens) in %.0f ms", len(live), size, encoded_ms)
    return [None] * len(batch)


async def send_all(embedded: Sequence[EmbeddedChunkSet], events: dict[tuple[str, int], Any],
                   ) -> list[Any]:
    """Hand every output that fits a record to the producer; dead-letter the input of each
    one over the limit (derived_too_large) instead. The futures of those sent."""
    sent = []
    for out in embedded:
        event = events[(out.doc_id, out.version)]
        key, value = embedded_key(out.model_id, out.doc_id), encode(out)
        async with boundary.record(event, count=False, operation="emit"):
            spans.annotate(doc_id=out.doc_id, version=out.version, model_id=out.model_id)
            sizes.check(value, key, "embedded chunk set", kafka.max_record_bytes)
            # On its input's partition (chunks.v1 is keyed by doc id too): every model's
            # records of a document land on the same retrieval shard whatever the key.
            sent.append(await embedded_topic.send(key=key, value=value,
                                                  partition=event.message.partition))
    return sent


async def _embedded(ready: SentenceEncoder, live: list[Pending]) -> list[EmbeddedChunkSet]:
    """The batch's outputs; if the batch fails, each set alone, dead-lettering the bad ones."""
    try:
        return await asyncio.to_thread(embed_sets, ready, [cs for _, cs in live],
                                       settings.forward_tokens)
    except Exception as exc:
        if is_fatal(exc):
            raise
        log.warning("embedding a batch of %d failed (%s); retrying one by one", len(live),
                    type(exc).__name__)
    out: list[EmbeddedChunkSet] = []
    for event, chunk_set in live:
        async with boundary.record(event, count=False, operation="retry"):
            out.extend(await asyncio.to_thread(embed_sets, ready, [chunk_set],
                                               settings.forward_tokens))
    return out
