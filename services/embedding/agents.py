"""Embedding agent: chunks.v1 -> chunks.embedded.v1 in batches cut whenever the encoder is free.

Decoded sets queue in a shared.batching Batcher (bounded: a full queue holds the consumer
back); its loop cuts the next batch the moment the previous one is on the broker, so
batches are one set when traffic is light and grow under load, within
max_batch_tokens / batch_max_docs.

Events are taken from the checkpoint unprocessed and handed back to it (`checkpoint.done`)
only once their output is on the broker, so a crash can never skip a batch: the worker
stops and its partitions replay from the last committed offset. Bad records are
dead-lettered (and done) one by one.

A sealed chunk set (shared/contract/sealed.py) is opened with the data-key store when it is
taken in, and its output sealed under the same key; a forgotten version's (its key
destroyed) goes on as its delete; one whose key this store lacks is dead-lettered.

The stage is one object, `Embedding`; its methods are the agent and warm-up task `build`
registers. Nothing lives at module level but the logger and constants.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
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
from shared.contract.sealed import (
    Forgotten,
    KeyUnavailable,
    as_delete,
    key_unavailable,
    open_chunks_with,
    seal_chunks,
    version_key,
)
from shared.contract.topics import embedded_key
from shared.encoder.runtime import SentenceEncoder, load_encoder
from shared.kafka import checkpoint, membership
from shared.keys.sealing import VersionKey
from shared.keys.settings import KeySettings
from shared.keys.store import VersionKeys
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import metrics
from shared.worker.boundary import Boundary, exit_now, export_counts, is_fatal
from shared.worker.topology import Topology

log = logging.getLogger(__name__)

Pending = tuple[Any, ChunkSet]  # (Faust event, its decoded ChunkSet, in clear)
SEALING_KEPT = 65_536  # keys of sealed sets held from intake to output (far above any inbox)


class Embedding:
    """One embedding stage on one app: its encoder (once loaded), key store and topics."""

    # The batcher class (scripts/benchlib/adaptive_wait.py swaps in another).
    batcher_class: type[Batcher[Pending, None]] = Batcher

    def __init__(self, app: faust.App, settings: EmbeddingSettings, kafka: KafkaSettings,
                 keys: KeySettings | None = None) -> None:
        self.app, self.settings, self.kafka = app, settings, kafka
        self.key_settings = keys or KeySettings()
        t = declare(app)
        self.topics = t
        self.embedded_topic, self.dlq = t.embedded, t.dlq
        self.ready = asyncio.Event()  # set once the encoder is loaded
        self.encoder: SentenceEncoder | None = None
        self.boundary = Boundary("embedding", t.dlq)
        # Each sealed version's key, from intake to its output (by doc id and version; the
        # newest SEALING_KEPT, so a set queued twice, a replay, still finds its key).
        self.sealing: OrderedDict[tuple[str, int], VersionKey] = OrderedDict()
        self.embed: Any = None  # the Faust agent, once registered

    def register(self) -> Topology:
        app, settings = self.app, self.settings
        export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                      metrics_port=settings.metrics_port)
        app.task(self.warm_up)
        self.embed = app.agent(self.topics.chunks, name=f"{__name__}.embed")(
            self.embed_sets_of)
        return Topology("embedding", app, settings, {"embed": self.embed}, self)

    @functools.cached_property
    def keys(self) -> VersionKeys:
        """The data-key store, opened at the first sealed chunk set."""
        return VersionKeys.from_settings(self.key_settings)

    async def warm_up(self) -> None:
        s = self.settings
        loaded = await asyncio.to_thread(load_encoder, s.encoder_runtime, s.device,
                                         s.encoder_threads, s.model_cache_dir, s.model_path,
                                         s.encoder_model_id(), workers=s.encoder_workers)
        await asyncio.to_thread(loaded.encode, ["warm-up"])
        self.encoder = loaded
        self.ready.set()
        log.info("encoder %s ready on %s (%s), batching %s", loaded.model_id, loaded.device,
                 loaded.runtime, s.limits())

    async def embed_sets_of(self, stream: Any) -> None:
        """chunks.v1 -> chunks.embedded.v1."""
        async def run(batch: Sequence[Pending]) -> list[None]:
            return await self.flush(batch)

        # propagate: a batch that fails past the per-set fallback stops the worker (replay).
        batcher: Batcher[Pending, None] = self.batcher_class(
            "embed", run, self.settings.limits(), self.settings.inbox_max_docs,
            propagate=True)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.intake(stream, batcher))
                group.create_task(self.serve(batcher))
        except Exception as exc:
            # Not app.crash(): Faust's stop would wait forever for the events queued here,
            # never done ("Wait for streams..."), the process alive and supervision none the
            # wiser. Nothing queued was done, so nothing of it is committed either way.
            log.exception("embedding failed; exiting so the batches in hand replay")
            exit_now(exc)
            raise

    def opened(self, chunk_set: ChunkSet) -> ChunkSet:
        """The set in clear, its `key_id` kept (so its output is sealed under the same key,
        never sent in clear) and its key held for the output; a forgotten version's
        delete."""
        if not chunk_set.sealed:
            return chunk_set
        try:
            key = version_key(chunk_set.doc_id, chunk_set.version, self.keys)
            opened = open_chunks_with(chunk_set, key)
        except Forgotten:
            return as_delete(chunk_set)
        except KeyUnavailable as exc:
            raise key_unavailable(chunk_set.doc_id, chunk_set.version) from exc
        self.sealing[(chunk_set.doc_id, chunk_set.version)] = key
        self.sealing.move_to_end((chunk_set.doc_id, chunk_set.version))
        while len(self.sealing) > SEALING_KEPT:
            self.sealing.popitem(last=False)
        return opened.model_copy(update={"key_id": chunk_set.key_id})

    def sealed(self, out: EmbeddedChunkSet) -> EmbeddedChunkSet:
        """The output as it may go on the topic: sealed under its input's key when the input
        was sealed (the key held since intake, else the store's; a version forgotten
        meanwhile goes as its delete), as it is otherwise."""
        if not out.key_id or out.op != "upsert":
            return out
        key = self.sealing.get((out.doc_id, out.version))
        if key is None:
            try:
                key = version_key(out.doc_id, out.version, self.keys)
            except Forgotten:
                return as_delete(out)
            except KeyUnavailable as exc:
                raise key_unavailable(out.doc_id, out.version) from exc
        return seal_chunks(out, key)

    async def intake(self, stream: Any, batcher: Batcher[Pending, None]) -> None:
        async for event in checkpoint.taken(stream):
            queued = False
            async with self.boundary.record(event):
                chunk_set = self.opened(decode(ChunkSet, event.message.value))
                spans.annotate(doc_id=chunk_set.doc_id, version=chunk_set.version)
                # A full queue holds the consumer back.
                await batcher.put((event, chunk_set), len(chunk_set.chunks),
                                  longest_chunk(chunk_set))
                queued = True
            if not queued:  # dead-lettered
                checkpoint.done(event)

    async def serve(self, batcher: Batcher[Pending, None]) -> None:
        await self.ready.wait()
        await batcher.serve()

    async def flush(self, batch: Sequence[Pending]) -> list[None]:
        """Embed one batch, put its outputs on the broker, then hand its inputs to the
        checkpoint."""
        assert self.encoder is not None
        # Events from before a rebalance belong to whoever owns the partition now and
        # replay there: skip the work but mark them done, as Faust does, or the next
        # rebalance waits on them. Marking them commits nothing: the checkpoint holds a
        # revoked partition until its next seek, and that seek forgets every ack from
        # before it.
        live = [(ev, cs) for ev, cs in batch
                if ev.message.generation_id == self.app.consumer_generation_id]
        started = time.perf_counter()
        embedded = await self._embedded(self.encoder, live)
        encoded_ms = (time.perf_counter() - started) * 1000
        if live and (why := await membership.evicted(self.app)):
            # Stopped past its session timeout while embedding, this worker wakes up with
            # a batch whose partitions went on without it: their new owner embeds them
            # from the committed offset, so sending them too only doubles the output.
            log.warning("%d sets embedded after this worker lost its partitions (%s): not "
                        "sent, they replay on the owner", len(live), why)
            embedded, live = [], []
        with spans.batch(self.boundary.stage, [ev.message for ev, _ in live]):
            sent = await self.send_all(embedded, {(cs.doc_id, cs.version): ev
                                                  for ev, cs in live})
        await asyncio.gather(*sent)  # on the broker before the inputs are done
        for event, _ in batch:
            checkpoint.done(event)
        metrics.batch(self.boundary.stage, len(batch))
        sets = [cs for _, cs in batch]
        size = padded_tokens(sum(len(cs.chunks) for cs in sets),
                             max(longest_chunk(cs) for cs in sets))
        log.info("embedded %d docs (%d padded tokens) in %.0f ms", len(live), size,
                 encoded_ms)
        return [None] * len(batch)

    async def send_all(self, embedded: Sequence[EmbeddedChunkSet],
                       events: dict[tuple[str, int], Any]) -> list[Any]:
        """Hand every output that fits a record to the producer (sealed under its input's
        key); dead-letter the input of each one over the limit (derived_too_large)
        instead. The futures of those sent."""
        sent = []
        for out in embedded:
            event = events[(out.doc_id, out.version)]
            async with self.boundary.record(event, count=False, operation="emit"):
                key, value = embedded_key(out.model_id, out.doc_id), encode(self.sealed(out))
                spans.annotate(doc_id=out.doc_id, version=out.version, model_id=out.model_id)
                sizes.check(value, key, "embedded chunk set", self.kafka.max_record_bytes)
                # On its input's partition (chunks.v1 is keyed by doc id too): every model's
                # records of a document land on the same retrieval shard whatever the key.
                sent.append(await self.embedded_topic.send(
                    key=key, value=value, partition=event.message.partition))
        return sent

    async def _embedded(self, ready: SentenceEncoder, live: list[Pending],
                        ) -> list[EmbeddedChunkSet]:
        """The batch's outputs; if the batch fails, each set alone, dead-lettering the bad
        ones."""
        try:
            return await asyncio.to_thread(embed_sets, ready, [cs for _, cs in live],
                                           self.settings.forward_tokens)
        except Exception as exc:
            if is_fatal(exc):
                raise
            log.warning("embedding a batch of %d failed (%s); retrying one by one",
                        len(live), type(exc).__name__)
        out: list[EmbeddedChunkSet] = []
        for event, chunk_set in live:
            async with self.boundary.record(event, count=False, operation="retry"):
                out.extend(await asyncio.to_thread(embed_sets, ready, [chunk_set],
                                                   self.settings.forward_tokens))
        return out


def build(on: faust.App, embedding: EmbeddingSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Build an embedding stage on `on` and register its agent and encoder warm-up."""
    return Embedding(on, embedding, kafka_settings).register()
