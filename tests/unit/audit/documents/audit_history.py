"""A small signed audit history (two partitions, three chained batches each) and its
on-chain view, for the verifier and auditor tests."""

from __future__ import annotations

from pydantic import SecretStr

from services.audit.documents.verify import ChainAnchor, OnChain, batch_key
from shared.contract.audit_batches import Tip, build_batch, leaf_for
from shared.contract.audit_signing import DEV_SIGNER, DEV_SIGNING_KEY, sign
from shared.contract.records import AuditBatch, Document, RedactedDocument

TOPIC = "docs.normalized.v1"
KEY = SecretStr(DEV_SIGNING_KEY)
KNOWN = frozenset({DEV_SIGNER.lower()})
PER_BATCH = 3


def history(epoch: str = "e1") -> tuple[list[RedactedDocument], list[AuditBatch]]:
    """Two partitions, three signed batches of three documents each, chained per partition;
    batch b of a partition consumed offsets 10b..10b+4 (the last two were dead-lettered)."""
    docs, batches = [], []
    for partition in (0, 1):
        tip = Tip.genesis(epoch)
        for b in range(3):
            raws = [Document(doc_id=f"p{partition}-d{b}{i}", version=1 + i % 2,
                             text=f"Mail jane{b}{i}@example.com now", source="s",
                             event_time=0, ingest_time=0) for i in range(PER_BATCH)]
            reds = [RedactedDocument(**r.model_dump(exclude={"text"}), text="Mail <EMAIL> now",
                                     entity_counts={"EMAIL_ADDRESS": 1}) for r in raws]
            leaves = [leaf_for(r, d, 10 * b + i) for i, (r, d) in enumerate(zip(raws, reds,
                                                                                 strict=True))]
            batch = sign(build_batch(TOPIC, partition, (10 * b, 10 * b + 4), leaves, reds, tip,
                                     "fp", 1.0), KEY)
            docs += [d.model_copy(update={"batch_id": batch.batch_id}) for d in reds]
            batches.append(batch)
            tip = Tip(epoch, batch.root, batch.last_offset)
    return docs, batches


def chain_of(batches: list[AuditBatch]) -> dict[str, OnChain]:
    return {b.batch_id: (b.root, b.prev_root, len(b.leaves), b.signer) for b in batches}


def on_chain(batches: list[AuditBatch], first_block: int = 10) -> list[ChainAnchor]:
    """The Anchored events a chain would hold for `batches`, one block each."""
    return [ChainAnchor(batch_key(b.batch_id), b.root, b.prev_root, len(b.leaves), b.signer,
                        first_block + i, f"0x{i:064x}", "0xC0") for i, b in enumerate(batches)]
