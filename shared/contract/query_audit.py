"""Query audits in the audit trail: the leaf a record becomes, batch ids, batch members.

Inference records a caller's subject as `principal_hash` under the audit principal key
and signs each QueryAudit and writes it to audit.queries.v1; the ledger batches
them per partition by offsets, as `<epoch>/audit.queries.v1/<partition>/<first>-<last>`,
and anchors the batch's RFC 6962 root with its signer. Nothing but the topic and the
anchor is needed to prove a record: the batch's leaves are the records at its offsets
that its signer signed, in offset order (`members`). The ledger builds batches with
this module and `streamrag audit prove --query` re-derives them with it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract import merkle
from shared.contract.audit_signing import recover
from shared.contract.records import QueryAudit
from shared.contract.topics import AUDIT_QUERIES

GENESIS_ROOT = "00" * 32
PRINCIPAL_SCHEME = "hmac-sha256:"
# A dev-only key for the principal hash: public, so anyone can hash a guessed subject.
DEV_PRINCIPAL_KEY = hashlib.sha256(b"streamrag dev audit principal key").hexdigest()


class AuditPrincipalSettings(BaseSettings):
    """The key callers' subjects are hashed with in query audits (env prefix
    STREAMRAG_AUDIT_, shared with shared.contract.audit_signing and retention; the classes
    keep their field names apart)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_AUDIT_", frozen=True)

    # The HMAC key a caller's subject is hashed with before inference records it (subjects
    # can be e-mail addresses); whoever holds it (an auditor: `streamrag audit queries
    # --subject`) finds a subject's records. The default is a public dev key.
    principal_key: SecretStr = SecretStr(DEV_PRINCIPAL_KEY)


def principal_hash(subject: str, key: SecretStr) -> str:
    """"hmac-sha256:<hex>" of `subject`; "" for no subject (open, service, anonymous)."""
    if not subject:
        return ""
    mac = hmac.new(key.get_secret_value().encode("utf-8"), subject.encode("utf-8"),
                   hashlib.sha256)
    return PRINCIPAL_SCHEME + mac.hexdigest()


def leaf_bytes(audit: QueryAudit) -> bytes:
    """The bytes hashed into the tree: the whole signed record, as canonical JSON."""
    return json.dumps(audit.model_dump(mode="json"), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def batch_root(leaves: Sequence[QueryAudit]) -> str:
    return merkle.root([merkle.leaf_hash(leaf_bytes(a)) for a in leaves]).hex()


def batch_id_for(epoch: str, partition: int, first: int, last: int) -> str:
    return f"{epoch}/{AUDIT_QUERIES.name}/{partition}/{first}-{last}"


@dataclass(frozen=True)
class BatchName:
    epoch: str
    partition: int
    first: int
    last: int


def parse_batch_id(batch_id: str) -> BatchName | None:
    """The parts of a query batch's id; None for any other batch (documents)."""
    parts = batch_id.split("/")
    if len(parts) != 4 or parts[1] != AUDIT_QUERIES.name:
        return None
    first, _, last = parts[3].partition("-")
    try:
        return BatchName(parts[0], int(parts[2]), int(first), int(last))
    except ValueError:
        return None


@dataclass(frozen=True)
class Tip:
    """The end of one partition's chain of query batches: what the next batch links to and
    starts after."""

    epoch: str
    root: str
    last_offset: int  # audits up to this offset are in an anchored batch already


def tip_from(anchored: Iterable[tuple[str, Any]], partition: int) -> Tip | None:
    """The partition's chain end among anchored batches ((batch id, Anchor JSON) pairs: the
    ledger's table); None when none of its query batches is there."""
    best: Tip | None = None
    for batch_id, record in anchored:
        name = parse_batch_id(batch_id)
        if name is None or name.partition != partition:
            continue
        if best is None or name.last > best.last_offset:
            best = Tip(name.epoch, str(record["root"]), name.last)
    return best


def signed_by(audit: QueryAudit, signer: str) -> bool:
    """Whether `audit` claims `signer` and its signature recovers to it."""
    return (bool(audit.signature) and audit.signer.lower() == signer.lower()
            and (recover(audit) or "").lower() == signer.lower())


def runs(items: Sequence[tuple[int, QueryAudit]]) -> list[list[tuple[int, QueryAudit]]]:
    """Authentic (offset, record) pairs of one partition, in offset order, cut where the
    signer changes: a batch has one signer, the one its anchor names."""
    out: list[list[tuple[int, QueryAudit]]] = []
    for item in items:
        if out and out[-1][-1][1].signer.lower() == item[1].signer.lower():
            out[-1].append(item)
        else:
            out.append([item])
    return out


def members(records: Iterable[tuple[int, QueryAudit]], first: int, last: int,
            signer: str) -> list[tuple[int, QueryAudit]]:
    """The leaves of the batch over offsets first..last signed by `signer`, in offset
    order: what the ledger batched (a forged or foreign record in the range is no leaf)."""
    return sorted(((o, a) for o, a in records if first <= o <= last and signed_by(a, signer)),
                  key=lambda oa: oa[0])


@dataclass(frozen=True)
class QueryProof:
    """That a query audit is leaf `index` of a batch's tree (RFC 6962 audit path)."""

    index: int
    size: int
    leaf_hash: str
    path: tuple[str, ...]
    root: str

    def holds_for(self, audit: QueryAudit) -> bool:
        """Recomputed from the record itself: any change to it fails."""
        return merkle.verify_inclusion(
            merkle.leaf_hash(leaf_bytes(audit)), self.index, self.size,
            [bytes.fromhex(p) for p in self.path], bytes.fromhex(self.root))


def prove(leaves: Sequence[QueryAudit], index: int) -> QueryProof:
    hashes = [merkle.leaf_hash(leaf_bytes(a)) for a in leaves]
    return QueryProof(index, len(hashes), hashes[index].hex(),
                      tuple(p.hex() for p in merkle.inclusion_proof(hashes, index)),
                      merkle.root(hashes).hex())


def question_sha256(question: str) -> str:
    return hashlib.sha256(question.encode("utf-8")).hexdigest()
