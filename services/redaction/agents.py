"""Redaction agent: micro-batch, redact, emit redacted docs, their subject index (who each
mentions, keyed) and one signed audit record per partition and batch.

A batch is done (shared/kafka/checkpoint.py, which alone commits) only when the loop
moves on from it, and that is only once the redacted documents, their subject index
records and the audit record are on the broker: sends are forced past Faust's attachments
(which may hang them on another partition's event) and awaited. Anything that stops a
batch midway (the broker, the reader, a lost partition) escapes the agent, and the worker
exits with the batch not done (shared/kafka/watchdog.py), so it replays. Input offsets an
audit record already covers are skipped, so a redelivery after a crash never forms a
second, overlapping batch. Logs name batches, counts and offsets only, never a document's
content, and no masked value leaves the redactor's thread but as its subject key.

The stage is one object, `Redaction`, built with its settings, topics, boundary and chain
ends; its methods are the agent, hook and task `build` registers. Nothing lives at module
level but the logger.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable
from typing import Any, cast

import faust
from eth_account import Account

from services.redaction.app import declare
from services.redaction.pii_counts import pii_counts
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from services.redaction.subjects import SubjectKeys
from shared.contract import forget
from shared.contract.audit_batches import Tip, build_batch, leaf_for, tips_from
from shared.contract.audit_signing import sign
from shared.contract.codec import decode, encode
from shared.contract.dlq import send_dead_letter
from shared.contract.forget import is_forget
from shared.contract.records import AuditBatch, Document, RedactedDocument, SubjectIndex
from shared.contract.sealed import KeyUnavailable, forgotten, key_unavailable, open_with, seal
from shared.contract.topics import AUDIT_BATCHES, DOCS_NORMALIZED
from shared.errors import InfrastructureError, InvalidInput
from shared.kafka import checkpoint, membership
from shared.kafka.reader import read_back
from shared.keys.sealing import VersionKey
from shared.keys.settings import KeySettings
from shared.keys.store import Destroyed, VersionKeys
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import metrics
from shared.worker.boundary import Boundary, export_counts
from shared.worker.topology import Topology

log = logging.getLogger(__name__)


class Chains:
    """Chain ends per partition, reloaded from the audit topic when continuity is lost.

    Continuity: the next event of a partition has the offset after the last one seen, and
    the partition has not been revoked since. Anything else (start, a rebalance, a replay)
    reloads every partition's end from the records this worker's key signed. A revocation
    alone must break continuity: a partition that comes back at the very offset this worker
    last saw may have been audited further meanwhile by a worker that died before
    committing, and the old end would chain a second batch over the same records.
    """

    def __init__(self, kafka: KafkaSettings, signer: str) -> None:
        self.kafka, self.signer = kafka, signer
        self.tips: dict[int, Tip] = {}
        self.expected: dict[int, int] = {}
        self.just_loaded: set[int] = set()

    async def tip(self, partition: int, offset: int) -> Tip:
        if partition not in self.just_loaded and self.expected.get(partition) != offset:
            # The newest records suffice: read back until every partition's end is found.
            def enough(records: list[Any]) -> bool:
                return len(tips_from(_decoded(records), self.signer)) == \
                    DOCS_NORMALIZED.partitions
            records = await read_back(self.kafka, AUDIT_BATCHES, enough)
            self.tips = tips_from(_decoded(records), self.signer)
            self.just_loaded = set(range(DOCS_NORMALIZED.partitions))
            log.info("chain ends reloaded from %s: %s", AUDIT_BATCHES.name,
                     {p: t.last_offset for p, t in sorted(self.tips.items())})
        return self.tips.get(partition) or self.tips.setdefault(partition, Tip.genesis())

    def saw(self, partition: int, last_offset: int) -> None:
        self.just_loaded.discard(partition)
        self.expected[partition] = last_offset + 1

    def forget(self, partitions: set[int]) -> None:
        """The partitions were revoked: their next event reloads the chain ends. So does
        the next event of any partition: a reload is fresh only until the group moves
        partitions, and one this worker loaded but never owned may be handed to it now
        with a chain another worker has since extended."""
        for partition in partitions:
            self.expected.pop(partition, None)
        self.just_loaded.clear()


def _decoded(records: list[Any]) -> list[AuditBatch]:
    out = []
    for record in records:
        try:
            out.append(decode(AuditBatch, record.value))
        except InvalidInput:
            continue  # not ours and not a record: it cannot move the chain
    return out


async def _deliver(topic: Any, key: bytes, value: bytes) -> Awaitable[Any]:
    """Hand the record to the producer now (not attached to an event); await the result
    for the broker's acknowledgement."""
    future: Awaitable[Any] = await topic.send(key=key, value=value, force=True)
    return future


class LostPartition(InfrastructureError):
    """Another worker audited the partition past the batch in hand: this one must stop."""


class Redaction:
    """One redaction stage on one app: its redactor (once loaded), chain ends and topics."""

    def __init__(self, app: faust.App, settings: RedactionSettings, kafka: KafkaSettings,
                 ) -> None:
        self.app, self.settings, self.kafka = app, settings, kafka
        t = declare(app)
        self.topics = t
        self.redacted_topic, self.audit_topic, self.dlq, self.stats_topic = \
            t.redacted, t.audit, t.dlq, t.stats
        self.subjects_topic = t.subjects
        self.subject_keys = SubjectKeys(settings.subject_key.get_secret_value().encode(),
                                        settings.phone_regions)
        # The address of settings.audit_signing_key: whose records extend the chains.
        self.signer: str = Account.from_key(
            settings.audit_signing_key.get_secret_value()).address
        # Per document: a bad one never takes its batch along.
        self.boundary = Boundary("redaction", t.dlq)
        self.chains = Chains(kafka, self.signer)
        self.key_settings = KeySettings()
        self.redactor: Redactor | None = None  # loaded by warm_up, off the event loop
        self.redact: Any = None  # the Faust agent, once registered

    @functools.cached_property
    def keys(self) -> VersionKeys:
        """The data-key store (opened at the first batch, off the event loop's start)."""
        return VersionKeys.from_settings(self.key_settings)

    def register(self) -> Topology:
        """Register the redaction agent, its analyzer's warm-up and its rebalance hook."""
        app, settings = self.app, self.settings
        export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                      metrics_port=settings.metrics_port)
        # mode types a signal handler as taking any positionals; Faust sends these ones.
        app.on_partitions_revoked.connect(self.on_revoked)  # type: ignore[arg-type]
        app.task(self.warm_up)  # a task: Faust passes the app to one with args
        self.redact = app.agent(self.topics.normalized, name=f"{__name__}.redact")(
            self.redact_batches)
        if settings.seal and (kept := settings.text_kept_s) is not None:
            app.timer(max(1.0, min(60.0, kept / 10)))(self.expire_keys)
        return Topology("redaction", app, settings, {"redact": self.redact}, self)

    async def expire_keys(self) -> int:  # a timer
        """The text retention as a forget by age: destroy the data keys made longer ago."""
        kept = self.settings.text_kept_s
        if kept is None:
            return 0
        gone = await asyncio.to_thread(self.keys.expire, time.time() - kept)
        if gone:
            log.info("text retention: %d data keys destroyed", gone)
        return gone

    async def on_revoked(self, app: Any, revoked: set[Any], **kwargs: Any) -> None:
        self.chains.forget({tp.partition for tp in revoked
                            if tp.topic == DOCS_NORMALIZED.name})

    async def warm_up(self) -> None:
        self.redactor = await asyncio.to_thread(Redactor, self.settings)
        log.info("redactor ready, analyzer fingerprint %s, audit signer %s",
                 self.redactor.fingerprint[:16], self.signer)

    async def _valid(self, events: list[Any]) -> list[tuple[Any, Document]]:
        out = []
        for event in events:
            async with self.boundary.record(event):
                doc = decode(Document, event.message.value)
                spans.annotate(doc_id=doc.doc_id, version=doc.version)
                out.append((event, doc))
        return out

    def _redact(self, ready: Redactor, docs: list[Document],
                ) -> list[tuple[RedactedDocument, SubjectIndex] | Exception]:
        """Each document redacted, with its subject index (off the event loop: keying the
        phone numbers parses them); the masked values go no further."""
        return [found if isinstance(found, Exception) else
                (found.doc, self.subject_keys.index(found))
                for found in ready.redact_found(docs)]

    async def _redacted(self, ready: Redactor, valid: list[tuple[Any, Document]],
                        ) -> list[tuple[Any, Document, RedactedDocument, SubjectIndex]]:
        results = await asyncio.to_thread(self._redact, ready, [doc for _, doc in valid])
        out = []
        for (event, doc), result in zip(valid, results, strict=True):
            if isinstance(result, Exception):
                # Refused labels say why (they never quote a label); any other exception's
                # message may quote the text, so only its type is kept.
                exc = result if isinstance(result, InvalidInput) else \
                    InvalidInput("redaction_failed", detail=type(result).__name__)
                with spans.emitting(event.message):
                    await send_dead_letter(self.dlq, "redaction", exc, event.message)
            else:
                out.append((event, doc, *result))
        return out

    async def _processed(self, ready: Redactor, valid: list[tuple[Any, Document]],
                         ) -> tuple[list[tuple[Any, Document, RedactedDocument, SubjectIndex]],
                                    dict[int, VersionKey], list[Document]]:
        """The batch's documents redacted (sealed under their keys) and its forgets made
        receipts, in input order; each sealed document's key, by input offset; and the
        forgets, whose keys go once the batch's audit record is on the broker. A version
        whose key was destroyed (a replay of a forgotten one) is dead-lettered
        (`forgotten`), never redacted again under a new key."""
        wanted = [(d.doc_id, d.version) for _, d in valid
                  if d.op == "upsert" and (self.settings.seal or d.sealed)]
        made = await asyncio.to_thread(self.keys.create, wanted) if wanted else {}
        plain, forgets = [], []
        for event, doc in valid:
            found = made.get((doc.doc_id, doc.version))
            if isinstance(found, Destroyed):
                with spans.emitting(event.message):
                    await send_dead_letter(self.dlq, "redaction", forgotten(
                        doc.doc_id, doc.version, found), event.message)
            elif is_forget(doc):
                forgets.append((event, doc))
            elif doc.sealed:  # ingest sealed it under the version's key: open it
                try:
                    plain.append((event, open_with(doc, cast(VersionKey, found))))
                except KeyUnavailable:
                    with spans.emitting(event.message):
                        await send_dead_letter(self.dlq, "redaction", key_unavailable(
                            doc.doc_id, doc.version), event.message)
            else:
                plain.append((event, doc))
        keys = {e.message.offset: k for e, d in plain if self.settings.seal
                and isinstance(k := made.get((d.doc_id, d.version)), VersionKey)}
        done = [(e, d, seal(red, keys[e.message.offset]) if e.message.offset in keys else red,
                 subjects) for e, d, red, subjects in await self._redacted(ready, plain)]
        done += [await self._receipt(event, doc) for event, doc in forgets]
        return (sorted(done, key=lambda t: t[0].message.offset), keys,
                [doc for _, doc in forgets])

    async def _receipt(self, event: Any, doc: Document,
                       ) -> tuple[Any, Document, RedactedDocument, SubjectIndex]:
        """The forget's delete as its receipt (shared/contract/forget.py), naming the keys
        of every version before it, which `_destroy` takes once the batch is audited."""
        held = await asyncio.to_thread(self.keys.held_below, doc.doc_id, doc.version,
                                       doc.ingest_time)
        red = RedactedDocument(**{
            **doc.model_dump(exclude={"metadata"}),
            "metadata": forget.receipt(doc.metadata, held, doc.ingest_time,
                                       forget.clear_copies_kept_ms())})
        subjects = SubjectIndex(doc_id=doc.doc_id, version=doc.version,
                                key_id=self.subject_keys.key_id)
        return event, doc, red, subjects

    async def _destroy(self, forgets: list[Document]) -> None:
        """Destroy the keys each forget's receipt names (idempotent: a forget redone after
        a crash, or found already audited, takes what is left and changes nothing else)."""
        for doc in forgets:
            gone = await asyncio.to_thread(
                self.keys.destroy, doc.doc_id, doc.version,
                f"forget {doc.metadata[forget.REQUEST]}", None, doc.ingest_time)
            log.info("forgot %s: %d keys destroyed (versions %s), request %s", doc.doc_id,
                     len(gone), [d.version for d in gone], doc.metadata[forget.REQUEST])

    def _forgets_in(self, events: list[Any]) -> list[Document]:
        """The forgets among events already audited (a replay): their keys may not have
        gone yet (a crash between the audit record and `_destroy`)."""
        out = []
        for event in events:
            try:
                doc = decode(Document, event.message.value)
            except InvalidInput:
                continue
            if is_forget(doc):
                out.append(doc)
        return out

    async def redact_partition(self, ready: Redactor, partition: int, events: list[Any],
                               ) -> None:
        """One partition's part of a micro-batch, on the broker when this returns."""
        chains = self.chains
        tip = await chains.tip(partition, events[0].message.offset)
        chains.saw(partition, events[-1].message.offset)
        fresh = [e for e in events if e.message.offset > tip.last_offset]
        if skipped := len(events) - len(fresh):
            log.info("partition %d: offsets %d-%d are audited already (a redelivery): "
                     "skipped", partition, events[0].message.offset,
                     events[skipped - 1].message.offset)
            await self._destroy(self._forgets_in(events[:skipped]))
        done, keys, forgets = await self._processed(ready, await self._valid(fresh)) \
            if fresh else ([], {}, [])
        if not done:
            return
        await self._still_owned(partition, tip)
        leaves = [leaf_for(doc, red, ev.message.offset, keys.get(ev.message.offset))
                  for ev, doc, red, _ in done]
        offsets = (fresh[0].message.offset, fresh[-1].message.offset)
        batch = sign(build_batch(DOCS_NORMALIZED.name, partition, offsets, leaves,
                                 [red for _, _, red, _ in done], tip, ready.fingerprint),
                     self.settings.audit_signing_key)
        # Each redacted document names its batch, so an auditor can regroup the topic; its
        # subject index follows it, on the broker before the batch is audited.
        sent = []
        named = {"batch_id": batch.batch_id}
        for ev, _, red, subjects in done:
            with spans.emitting(ev.message):
                sent.append(await _deliver(self.redacted_topic, red.doc_id.encode(),
                                           encode(red.model_copy(update=named))))
                sent.append(await _deliver(self.subjects_topic, red.doc_id.encode(),
                                           encode(subjects.model_copy(update=named))))
        await asyncio.gather(*sent)
        await self._still_owned(partition, tip)
        await (await _deliver(self.audit_topic, str(partition).encode(), encode(batch)))
        # The receipts are audited: now their keys go (a crash before this replays the
        # batch as audited already, and the skipped forgets are carried out then).
        await self._destroy(forgets)
        counted = [await _deliver(self.stats_topic, c.source.encode(), encode(c))
                   for c in pii_counts([red for _, _, red, _ in done])]
        await asyncio.gather(*counted)
        chains.tips[partition] = Tip(tip.epoch, batch.root, batch.last_offset)
        log.info("audit batch %s: %d docs, root %s", batch.batch_id, batch.doc_count,
                 batch.root[:16])

    async def _still_owned(self, partition: int, tip: Tip) -> None:
        """Exit mid-batch if another worker may have audited this partition past `tip`, the
        chain end this batch extends: a worker stopped past its session timeout wakes up
        with a batch the partition's new owner has since audited from the same end, and its
        audit record would fork the chain, giving the documents a second leaf.

        The group coordinator confirming this worker's membership
        (shared/kafka/membership.py) settles it. Unconfirmed (evicted, or rejoining after a
        stall that starved its heartbeats, as a lone worker under heavy load is), the chain
        end on the audit topic decides: moved past `tip`, the batch is another's and
        LostPartition ends the worker, writing nothing more and the batch not done (it
        replays on the owner, as after kill -9); still at `tip`, nobody has audited these
        offsets and the batch goes on. Left open: a new owner that read the same end and
        sends in the moment after this one checks."""
        app = self.app
        why = await membership.confirm(app)
        if why is None:
            return
        def found(records: list[Any]) -> bool:
            return partition in tips_from(_decoded(records), self.signer)
        records = await read_back(self.kafka, AUDIT_BATCHES, found)
        now = tips_from(_decoded(records), self.signer).get(partition, Tip.genesis())
        if (now.root, now.last_offset) == (tip.root, tip.last_offset):
            log.warning("membership of %s unconfirmed (%s) with partition %d in hand; its "
                        "chain end is unchanged, so the batch goes on", app.conf.id, why,
                        partition)
            return
        log.critical("membership of %s unconfirmed with partition %d in hand (%s) and its "
                     "chain end moved past this batch's: stopping, the batch not done",
                     app.conf.id, partition, why)
        msg = f"partition {partition} is audited past this batch by another worker"
        raise LostPartition(msg)

    async def _loaded(self) -> Redactor:
        while self.redactor is None:
            await asyncio.sleep(0.1)
        return self.redactor

    async def redact_batches(self, stream: Any) -> None:
        """docs.normalized.v1 -> docs.redacted.v1 + pii.subjects.v1 + audit.batches.v1."""
        # Before the first batch is taken: a batch in hand while the analyzer loads
        # (seconds) would hold a stop waiting for it.
        ready = await self._loaded()
        stage = self.boundary.stage
        async for groups in checkpoint.batches(stream, self.settings.batch_max_docs,
                                               self.settings.batch_within_s):
            # Whatever raises here (the broker, the reader, LostPartition) is not a
            # record's fault: it leaves the agent with the batch not done, and the worker
            # exits.
            for partition, events in groups.items():
                metrics.batch(stage, len(events))
                with metrics.sending_for(stage), \
                        spans.batch(stage, [e.message for e in events]):
                    await self.redact_partition(ready, partition, events)


def build(on: faust.App, redaction: RedactionSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Build a redaction stage on `on` and register its agent, its analyzer's warm-up and
    its rebalance hook."""
    return Redaction(on, redaction, kafka_settings).register()
