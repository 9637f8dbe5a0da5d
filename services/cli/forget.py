"""`streamrag forget DOC_ID ... | --subject VALUE`: erase documents, with a receipt that proves it.

Each document gets a forget request on docs.raw.v1 (shared/contract/forget.py), which the
mesh carries out in order with the document's other changes: ingest makes it the
document's delete at its next version, redaction destroys the data keys of every earlier
version (so every sealed copy, on the evidence topic and in any backup, stops opening)
and writes the delete as a receipt that is a leaf of a signed audit batch, and every
stage downstream drops the document (chunk topics, shards and snapshots). This command
waits until each receipt is on docs.redacted.v1, its batch anchored and the forget carried
out (redaction destroys the keys after the batch's audit record and commits its input only
after that: its committed offset past the batch says the keys are gone, even when a worker
was killed in between and its replay finished the job), then prints them.

`--subject` forgets every document whose indexed version mentions the person (an e-mail,
a phone number, a name or an identifier as redaction masked it; `streamrag subjects`).
Exit 0: every receipt anchored and carried out; 1: nothing to forget, or not all done in
time (the requests stand: the mesh carries them out when it can); 2: the broker is not
reachable or the subject index cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.cli import subjects as subject_index
from services.cli.produce import send
from shared.contract import forget
from shared.contract.codec import decode
from shared.contract.records import Anchor, RedactedDocument
from shared.contract.topics import DOCS_NORMALIZED, DOCS_REDACTED, LEDGER_ANCHORS, TopicSpec
from shared.errors import InfrastructureError, InvalidInput
from shared.kafka.offsets import committed, groups_of
from shared.settings import KafkaSettings

DONE, NOT_DONE, UNREACHABLE = 0, 1, 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("forget", help="erase documents (or every document mentioning a "
                       "person) from the mesh, with a signed, anchored receipt")
    p.add_argument("doc_ids", nargs="*", metavar="DOC_ID", help="documents to forget")
    p.add_argument("--subject", action="append", default=[], metavar="VALUE",
                   help="forget every document that mentions VALUE (repeatable)")
    p.add_argument("--kind", choices=[*subject_index.KINDS, "any"], default="any",
                   help="what each --subject VALUE is (default: any kind)")
    p.add_argument("--by", default="", help="who asks, recorded in the receipt "
                   "(default: user@host)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for the receipts to be anchored (default 300)")
    p.add_argument("--no-wait", action="store_true", help="send the requests and exit")
    p.add_argument("--json", action="store_true", help="print the receipts as JSON")


@dataclass
class Pending:
    doc_id: str
    request_id: str
    receipt: RedactedDocument | None = None
    anchor: Anchor | None = None
    # Seconds from sending the requests until the receipt was read / its anchor announced.
    receipt_s: float | None = None
    anchor_s: float | None = None
    # Redaction committed past the receipt's batch: its keys are destroyed.
    carried_out: bool = False

    @property
    def done(self) -> bool:
        return self.anchor is not None and self.carried_out


def subject_documents(kafka: KafkaSettings, values: list[str], kind: str) -> list[str]:
    """Every document any indexed version of which mentions one of `values`."""
    if not values:
        return []
    key_settings = subject_index.SubjectKey()
    key = key_settings.key.get_secret_value().encode()
    keys = set().union(*(subject_index.wanted(key, kind, v, key_settings.phone_regions)
                         for v in values))
    records = asyncio.run(subject_index.read_index(kafka))
    return sorted({r.doc_id for r in records if keys & set(r.subjects)})


def request(doc_id: str, request_id: str, by: str) -> tuple[bytes, bytes]:
    value = {"schema_version": 1, "op": "forget", "id": doc_id, "request_id": request_id,
             "requested_by": by}
    return doc_id.encode(), json.dumps(value).encode()


async def _ends(consumer: AIOKafkaConsumer, specs: tuple[TopicSpec, ...]) -> None:
    parts = [TopicPartition(s.name, p) for s in specs for p in range(s.partitions)]
    consumer.assign(parts)
    for tp, end in (await consumer.end_offsets(parts)).items():
        consumer.seek(tp, end)


async def carry_out(kafka: KafkaSettings, pending: list[Pending], by: str, wait: bool,
                    timeout: float) -> None:
    """Send the requests; with `wait`, follow docs.redacted.v1 and ledger.anchors.v1 from
    their ends (read before sending) until every receipt is there and anchored."""
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, **kafka.client_options())
    await consumer.start()
    try:
        await _ends(consumer, (DOCS_REDACTED, LEDGER_ANCHORS))
        await send(kafka, (request(p.doc_id, p.request_id, by) for p in pending),
                   progress=False)
        if not wait:
            return
        sent = time.monotonic()
        by_request = {p.request_id: p for p in pending}
        anchors: dict[str, Anchor] = {}
        deadline = sent + timeout
        checked = 0.0
        while time.monotonic() < deadline and not all(p.done for p in pending):
            batches = await consumer.getmany(timeout_ms=200, max_records=2000)
            for tp, records in batches.items():
                for r in records:
                    _take(tp.topic, r.value, by_request, anchors)
            now = time.monotonic() - sent
            for p in pending:
                if p.receipt is not None and p.receipt_s is None:
                    p.receipt_s = now
                if p.receipt is not None and p.anchor is None:
                    p.anchor = anchors.get(p.receipt.batch_id)
                    p.anchor_s = now if p.anchor is not None else None
            waiting = [p for p in pending if p.anchor is not None and not p.carried_out]
            if waiting and time.monotonic() - checked >= 1.0:
                checked = time.monotonic()
                await _carried_out(kafka, waiting)
    finally:
        await consumer.stop()


def batch_end(batch_id: str) -> tuple[int, int]:
    """(partition, last offset) of docs.normalized.v1 an audit batch id names."""
    _, _, partition, offsets = batch_id.rsplit("/", 3)
    return int(partition), int(offsets.split("-")[1])


async def _carried_out(kafka: KafkaSettings, waiting: list[Pending]) -> None:
    """Mark each forget whose batch redaction has committed past (committed offsets are
    the next offset to read)."""
    ends = {p.request_id: batch_end(p.receipt.batch_id) for p in waiting if p.receipt}
    tps = sorted({TopicPartition(DOCS_NORMALIZED.name, part) for part, _ in ends.values()})
    found = await committed(kafka, groups_of("redaction"), tps)
    for p in waiting:
        part, last = ends[p.request_id]
        c = found.get(TopicPartition(DOCS_NORMALIZED.name, part))
        p.carried_out = c is not None and c.offset > last


def _take(topic: str, value: bytes | None, by_request: dict[str, Pending],
          anchors: dict[str, Anchor]) -> None:
    try:
        if topic == DOCS_REDACTED.name:
            doc = decode(RedactedDocument, value)
            mine = by_request.get(doc.metadata.get(forget.REQUEST, ""))
            if mine is not None and forget.is_forget(doc) and doc.doc_id == mine.doc_id:
                mine.receipt = doc
        else:
            anchor = decode(Anchor, value)
            anchors[anchor.batch_id] = anchor
    except InvalidInput:
        return  # not a record of ours


def as_json(pending: list[Pending]) -> list[dict[str, Any]]:
    out = []
    for p in pending:
        receipt = forget.read_receipt(p.receipt.metadata) if p.receipt else None
        out.append({"doc_id": p.doc_id, "request_id": p.request_id,
                    "version": p.receipt.version if p.receipt else None,
                    "receipt": receipt, "batch_id": p.receipt.batch_id if p.receipt else None,
                    "tx_hash": p.anchor.tx_hash if p.anchor else None,
                    "block_number": p.anchor.block_number if p.anchor else None,
                    "receipt_after_s": p.receipt_s, "anchored_after_s": p.anchor_s,
                    "carried_out": p.carried_out, "done": p.done})
    return out


def table(pending: list[Pending]) -> str:
    rows = [("doc id", "versions forgotten", "keys destroyed", "receipt", "anchored",
             "carried out")]
    for item in as_json(pending):
        r = item["receipt"]
        rows.append((item["doc_id"],
                     ", ".join(map(str, r["versions"])) or "(none held)" if r else "-",
                     str(len(r["keys_destroyed"])) if r else "-",
                     f"v{item['version']} in {item['batch_id']}" if r else "not yet",
                     f"tx {item['tx_hash'][:18]}.. block {item['block_number']}"
                     if item["tx_hash"] else "not yet",
                     "yes" if item["carried_out"] else "not yet"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


def run(args: argparse.Namespace) -> int:
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    kafka = KafkaSettings()
    try:
        found = subject_documents(kafka, args.subject, args.kind)
    except subject_index.IndexUnreadable as exc:
        print(f"streamrag forget: {exc}.", file=sys.stderr)
        return UNREACHABLE
    doc_ids = list(dict.fromkeys([*args.doc_ids, *found]))
    if not doc_ids:
        print("streamrag forget: nothing to forget (no DOC_ID given"
              + (", and no indexed document mentions the subject)" if args.subject else ")"),
              file=sys.stderr)
        return NOT_DONE
    by = args.by or f"{getpass.getuser()}@{socket.gethostname()}"
    base = uuid.uuid4().hex[:16]
    pending = [Pending(d, f"{base}-{i}") for i, d in enumerate(doc_ids)]
    print(f"forgetting {len(pending)} documents (request {base}) ...", file=sys.stderr)
    try:
        asyncio.run(carry_out(kafka, pending, by, not args.no_wait, args.timeout))
    except (KafkaError, InfrastructureError, OSError) as exc:
        print(f"streamrag forget: the broker at {kafka.bootstrap} did not take the requests "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)
        return UNREACHABLE
    if args.no_wait:
        print(f"sent {len(pending)} forget requests (request {base})")
        return DONE
    print(json.dumps(as_json(pending), indent=2) if args.json else table(pending))
    missing = [p.doc_id for p in pending if not p.done]
    if missing:
        print(f"streamrag forget: {len(missing)} forgets not anchored and carried out within "
              f"{args.timeout:g} s; the requests stand and are carried out when the mesh "
              f"can: check with `streamrag audit prove DOC`", file=sys.stderr)
        return NOT_DONE
    return DONE
