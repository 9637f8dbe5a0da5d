"""Audit records for redaction micro-batches: canonical leaves, Merkle root, hash chain.

A batch is named by the input offsets it consumed, in its partition's epoch; the chain's
end (Tip) is rebuilt from the audit topic itself, not kept in a table beside it: the
audit records are the chain's one source.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shared.contract import merkle
from shared.contract.audit_signing import recover
from shared.contract.records import AuditBatch, AuditLeaf, Document, RedactedDocument
from shared.keys.sealing import VersionKey

GENESIS_ROOT = "00" * 32


def content_sha256(title: str, text: str, metadata: dict[str, str],
                   acl: tuple[str, ...] = ()) -> str:
    """The hash a leaf holds of one side of a document: its content and its access labels,
    so a proof shows who could read the version too. Without labels it is the hash that
    leaves had before labels existed (old batches still verify)."""
    parts: list[object] = [title, text, sorted(metadata.items())]
    if acl:
        parts.append(list(acl))
    canon = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def sealed_content(doc: RedactedDocument) -> list[object]:
    """What a sealed record's leaf hash covers: its key id, its sealed text (which binds
    title, text and metadata for the key holder) and its access labels."""
    return ["sealed", doc.key_id, doc.sealed, list(doc.acl)]


def document_sha256(doc: Document) -> str:
    if isinstance(doc, RedactedDocument) and doc.sealed:
        canon = json.dumps(sealed_content(doc), ensure_ascii=False)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()
    return content_sha256(doc.title, doc.text, doc.metadata, doc.acl)


def raw_mac(raw: Document, key: VersionKey) -> str:
    """The leaf's keyed hash of the raw side: the same parts as content_sha256, under the
    version's hash key."""
    parts: list[object] = [raw.title, raw.text, sorted(raw.metadata.items())]
    if raw.acl:
        parts.append(list(raw.acl))
    return key.mac(json.dumps(parts, ensure_ascii=False).encode("utf-8"))


def leaf_for(raw: Document, redacted: RedactedDocument, offset: int,
             key: VersionKey | None = None) -> AuditLeaf:
    """The leaf of one version; with its data key, its raw side keyed (a guess of the text
    confirms nothing without the key) and its redacted side the sealed record's hash."""
    if key is None:
        return AuditLeaf(
            doc_id=raw.doc_id, version=raw.version, offset=offset,
            redacted_sha256=document_sha256(redacted), raw_sha256=document_sha256(raw))
    return AuditLeaf(doc_id=raw.doc_id, version=raw.version, offset=offset,
                     redacted_sha256=document_sha256(redacted), raw_sha256=raw_mac(raw, key),
                     key_id=key.key_id)


def canonical(leaf: AuditLeaf) -> bytes:
    """The bytes hashed into the tree: (doc id, version, redacted sha, raw sha), and the
    key id when the leaf is keyed."""
    parts: list[object] = [leaf.doc_id, leaf.version, leaf.redacted_sha256, leaf.raw_sha256]
    if leaf.key_id:
        parts.append(leaf.key_id)
    return json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def batch_root(leaves: Sequence[AuditLeaf]) -> str:
    return merkle.root([merkle.leaf_hash(canonical(leaf)) for leaf in leaves]).hex()


def batch_id_for(epoch: str, topic: str, partition: int, first: int, last: int) -> str:
    """Unique across log incarnations (epoch) and fixed by the offsets the batch consumed."""
    return f"{epoch}/{topic}/{partition}/{first}-{last}"


def new_epoch() -> str:
    return secrets.token_hex(6)


@dataclass(frozen=True)
class Tip:
    """The end of one partition's chain: what the next batch links to and starts after."""

    epoch: str
    root: str
    last_offset: int  # input offsets up to here are in an audit record already

    @classmethod
    def genesis(cls, epoch: str | None = None) -> Tip:
        return cls(epoch or new_epoch(), GENESIS_ROOT, -1)


def tips_from(batches: Iterable[AuditBatch], signer: str) -> dict[int, Tip]:
    """Each partition's chain end, rebuilt from the audit topic (records in topic order).

    Only records that `signer` signed count: a forged record must not move the chain or
    make redaction skip offsets.
    """
    tips: dict[int, Tip] = {}
    for batch in batches:
        if batch.signer.lower() != signer.lower() or recover(batch) != batch.signer:
            continue
        tip = tips.get(batch.partition)
        if tip is None or tip.epoch != batch.epoch or batch.last_offset > tip.last_offset:
            tips[batch.partition] = Tip(batch.epoch, batch.root, batch.last_offset)
    return tips


def build_batch(
    topic: str, partition: int, offsets: tuple[int, int], leaves: Sequence[AuditLeaf],
    redacted: Sequence[RedactedDocument], tip: Tip, fingerprint: str, now: float | None = None,
) -> AuditBatch:
    """The (unsigned) record of a batch that consumed input offsets[0]..offsets[1]."""
    counts: Counter[str] = Counter()
    for doc in redacted:
        counts.update(doc.entity_counts)
    first, last = offsets
    return AuditBatch(
        batch_id=batch_id_for(tip.epoch, topic, partition, first, last),
        partition=partition, first_offset=first, last_offset=last,
        doc_count=len(leaves), entity_counts=dict(counts), analyzer_fingerprint=fingerprint,
        leaves=tuple(leaves), root=batch_root(leaves), prev_root=tip.root,
        created_at=time.time() if now is None else now, epoch=tip.epoch,
    )


@dataclass(frozen=True)
class InclusionProof:
    """That one document version is leaf `index` of a batch's tree (RFC 6962 audit path)."""

    batch_id: str
    index: int
    size: int
    leaf: AuditLeaf
    leaf_hash: str
    path: tuple[str, ...]
    root: str

    def holds(self) -> bool:
        """Recomputed from the leaf itself, not trusting leaf_hash."""
        return merkle.verify_inclusion(
            merkle.leaf_hash(canonical(self.leaf)), self.index, self.size,
            [bytes.fromhex(p) for p in self.path], bytes.fromhex(self.root))


def prove(batch: AuditBatch, doc_id: str, version: int | None = None) -> InclusionProof:
    """The proof for `doc_id` (its newest version in the batch unless `version` is given)."""
    found = [i for i, leaf in enumerate(batch.leaves)
             if leaf.doc_id == doc_id and version in (None, leaf.version)]
    if not found:
        raise KeyError(f"{doc_id} is not in batch {batch.batch_id}")
    i = found[-1]
    hashes = [merkle.leaf_hash(canonical(leaf)) for leaf in batch.leaves]
    return InclusionProof(batch.batch_id, i, len(hashes), batch.leaves[i], hashes[i].hex(),
                          tuple(p.hex() for p in merkle.inclusion_proof(hashes, i)), batch.root)
