"""Forget requests and receipts, as they ride the document path.

A forget request is an input record `{"op": "forget", "id": DOC, "request_id": ...,
"requested_by": ...}` on docs.raw.v1 (what `streamrag forget` writes). Ingest turns it into
a delete of the document at its next version whose metadata holds the request (REQUEST,
BY); every stage downstream applies it as the delete it is (the index, the chunk topics,
the shards and their snapshots drop the document). Redaction, which makes the data keys,
destroys the keys of every earlier version and writes the delete on docs.redacted.v1 with
the receipt in its metadata (the keys below): the receipt is a leaf of a signed audit
batch, anchored like any other, so `streamrag audit prove DOC` proves the forget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from shared.contract.records import Document
from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import (
    DOCS_RAW,
    DRIFT_SAMPLES,
    DRIFT_WINDOWS,
    SEARCH_REPLIES,
    all_topic_specs,
    with_audit_retention,
)

PREFIX = "streamrag.forget."
REQUEST = PREFIX + "request"  # the request's id (the CLI draws one)
BY = PREFIX + "by"  # who asked, as the request says
AT = PREFIX + "at"  # when the keys were destroyed (seconds since the epoch)
VERSIONS = PREFIX + "versions"  # JSON list of the versions whose keys went
KEYS = PREFIX + "keys"  # JSON list of the key ids destroyed
# When the last clear copy (CLEAR_COPIES: Kafka deletes no single record) is past its
# topic's retention.
RAW_EXPIRES_BY = PREFIX + "raw_expires_by"
STORES = PREFIX + "stores"  # JSON list of what the forget clears, as the receipt states it

# What a forget clears, as every receipt states it (docs/design/forgetting.md).
STORES_CLEARED = (
    "data keys of every earlier version and transit keys of what was parsed before the "
    "request (destroyed: every sealed copy on docs.parsed.v1, docs.normalized.v1, "
    "docs.redacted.v1 and in any backup is unreadable)",
    "chunks.v1, chunks.embedded.v1 (deletes; compaction drops the older records)",
    "retrieval shards, their BM25 and snapshot files (the delete)",
    "pii.subjects.v1 (the delete's empty index supersedes the version's keys)",
)
MAX_BY = 256
# Where clear text lies outside the sealed stores: the client's own bytes, in the shards'
# replies to searches (hit texts, in flight for an hour), and in drift telemetry. Kafka
# cannot delete one record there; each keeps records for its retention. (Ingest seals
# docs.parsed.v1 and docs.normalized.v1 unless STREAMRAG_INGEST_SEAL is false, a switch
# for measuring what sealing costs: the receipts then understate what stays readable.)
CLEAR_COPIES = (DOCS_RAW.name, SEARCH_REPLIES.name,
                # Drift: each version's most frequent words (an hour), and on a drift event
                # the farthest documents' titles and over-represented words (a week).
                DRIFT_SAMPLES.name, DRIFT_WINDOWS.name)


def kept_ms(retention: AuditRetentionSettings | None = None) -> dict[str, int | None]:
    """How long each topic keeps a record as the contract creates it (None: for ever)."""
    r = retention or AuditRetentionSettings()
    specs = with_audit_retention(all_topic_specs(), r.retention_ms, r.text_retention_ms,
                                 r.raw_retention_ms)
    return {s.name: s.expires_after() for s in specs}


def clear_copies_kept_ms(retention: AuditRetentionSettings | None = None) -> int | None:
    """The longest any topic holding clear text keeps a record (CLEAR_COPIES), as the
    contract creates them (None: one keeps it for ever); Kafka deletes whole segments,
    each rolled within one retention, so a record is gone within twice this."""
    topics = kept_ms(retention)
    kept = [topics[name] for name in CLEAR_COPIES]
    return None if any(k is None for k in kept) else 2 * max(k for k in kept if k)


def is_forget(doc: Document) -> bool:
    return doc.op == "delete" and REQUEST in doc.metadata


def request_marker(request_id: str, requested_by: str) -> dict[str, str]:
    return {REQUEST: request_id, BY: requested_by}


def receipt(request: Mapping[str, str], keys: Sequence[tuple[str, int]], asked_at: float,
            kept_ms: int | None) -> dict[str, str]:
    """The receipt's fields (the delete's metadata on docs.redacted.v1): `keys`, the (key id,
    version) of every earlier version and (version < 0) of every transit key of what was
    parsed before the request, which redaction destroys once the receipt's audit
    record is on the broker; its time is the request's (when ingest took it), so the same
    forget redone after a crash writes the same receipt; the clear copies are gone `kept_ms`
    after it (clear_copies_kept_ms; None: never)."""
    expires = None if kept_ms is None else asked_at + kept_ms / 1000
    return {
        REQUEST: request[REQUEST], BY: request.get(BY, ""), AT: f"{asked_at:.3f}",
        VERSIONS: json.dumps(sorted({v for _, v in keys if v > 0})),
        KEYS: json.dumps(sorted({k for k, _ in keys})),
        RAW_EXPIRES_BY: "" if expires is None else f"{expires:.0f}",
        STORES: json.dumps(list(STORES_CLEARED)),
    }


def read_receipt(metadata: Mapping[str, str]) -> dict[str, object]:
    """A receipt's fields, typed (for `audit prove` and `forget`)."""
    expires = metadata.get(RAW_EXPIRES_BY, "")
    return {"request_id": metadata.get(REQUEST, ""), "requested_by": metadata.get(BY, ""),
            "at": float(metadata.get(AT, "0") or 0),
            "versions": json.loads(metadata.get(VERSIONS, "[]")),
            "keys_destroyed": json.loads(metadata.get(KEYS, "[]")),
            "raw_expires_by": float(expires) if expires else None,
            "stores": json.loads(metadata.get(STORES, "[]"))}
