"""`streamrag audit prove DOC_ID` and `streamrag audit verify`: read the topics and the chain.

Run as `python -m services.audit.documents.auditor` (what `streamrag audit` runs). It reads
docs.redacted.v1, audit.batches.v1 and ledger.anchors.v1 from the beginning with a plain
consumer (no group), and the AuditAnchor contract through any JSON-RPC node: each batch's
anchor, and for verify every anchor of the known signers (services.audit.onchain), so
an anchored batch whose evidence is gone is named, never passed over. Verify also holds
redaction's input to its outputs: every record of docs.normalized.v1 below the committed
offsets of redaction's group has an audit leaf or a dead letter (services.audit.documents.inputs
reads, services.audit.documents.coverage decides). The checks themselves are
services.audit.documents.verify, .coverage and shared.contract.audit_batches.prove.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from web3 import Web3

from services.audit.documents.coverage import Coverage, describe
from services.audit.documents.coverage import as_json as coverage_json
from services.audit.documents.evidence import EvidenceError, read_evidence
from services.audit.documents.inputs import RefusedError, read_commits, read_coverage
from services.audit.documents.verify import (
    ChainAnchor,
    OnChain,
    Report,
    TextRetention,
    check_anchor,
    verify,
)
from services.audit.onchain import (
    ANCHORS_ABI,
    contracts_to_read,
    read_anchors,
    recorded_contract,
)
from shared.contract.audit_batches import canonical, document_sha256, prove, sealed_content
from shared.contract.audit_signing import AuditSignerSettings, check, digest, signed_bytes
from shared.contract.codec import decode
from shared.contract.forget import REQUEST, is_forget, read_receipt
from shared.contract.records import Anchor, AuditBatch, Record, RedactedDocument
from shared.contract.topics import AUDIT_BATCHES, DOCS_REDACTED, LEDGER_ANCHORS, TopicSpec
from shared.errors import InvalidInput
from shared.kafka.reader import read_topic
from shared.settings import KafkaSettings, LedgerSettings, ProcessSettings

T = TypeVar("T", bound=Record)


@dataclass
class Loaded:
    docs: list[RedactedDocument]
    batches: list[AuditBatch]
    anchors: list[Anchor]
    unreadable: list[str]  # "topic partition/offset: reason" of records that do not decode


def _decode_all(model: type[T], spec: TopicSpec, records: list[Any],
                unreadable: list[str]) -> list[T]:
    out = []
    for r in records:
        try:
            out.append(decode(model, r.value))
        except InvalidInput as exc:
            unreadable.append(f"{spec.name} {r.partition}/{r.offset}: {exc.reason}")
    return out


def load(kafka: KafkaSettings) -> Loaded:
    async def go() -> tuple[list[Any], ...]:
        return tuple([await read_topic(kafka, spec)
                      for spec in (DOCS_REDACTED, AUDIT_BATCHES, LEDGER_ANCHORS)])
    docs, batches, anchors = asyncio.run(go())
    bad: list[str] = []
    return Loaded(_decode_all(RedactedDocument, DOCS_REDACTED, docs, bad),
                  _decode_all(AuditBatch, AUDIT_BATCHES, batches, bad),
                  _decode_all(Anchor, LEDGER_ANCHORS, anchors, bad), bad)


def chain_reader(ledger: LedgerSettings, anchors: list[Anchor],
                 ) -> Callable[[str], OnChain | None]:
    """batch id -> what the contract holds for it (None: not anchored).

    Read from the contract its latest announcement on ledger.anchors.v1 names, else the
    configured one, else the newest one announced.
    """
    named = {a.batch_id: a.contract for a in anchors}
    default = ledger.contract_address or next((a.contract for a in reversed(anchors)), "")
    w3 = Web3(Web3.HTTPProvider(ledger.rpc_url))
    contracts: dict[str, Any] = {}

    def read(batch_id: str) -> OnChain | None:
        address = named.get(batch_id, default)
        if not address:
            return None
        if address not in contracts:
            contracts[address] = w3.eth.contract(address=Web3.to_checksum_address(address),
                                                 abi=ANCHORS_ABI)
        key = hashlib.sha256(batch_id.encode("utf-8")).digest()
        root, prev, count, block, signer = contracts[address].functions.anchors(key).call()
        return None if block == 0 else (root.hex(), prev.hex(), count, signer)
    return read


def known_signers(args: argparse.Namespace) -> frozenset[str]:
    return (frozenset(s.lower() for s in args.signer) if args.signer
            else AuditSignerSettings().known())


def run_prove(args: argparse.Namespace, kafka: KafkaSettings, ledger: LedgerSettings) -> int:
    data = load(kafka)
    known = known_signers(args)
    mine = [d for d in data.docs
            if d.doc_id == args.doc_id and args.version in (None, d.version)]
    if not mine:
        return prove_from_record(args, data, ledger, known)
    # The newest version; of its copies, one whose batch has a record (a copy from a batch
    # cut short by a crash names a batch that was never recorded).
    newest = max(d.version for d in mine)
    ids = {b.batch_id for b in data.batches}
    doc = next((d for d in reversed(mine) if d.version == newest and d.batch_id in ids),
               mine[-1])
    records = [b for b in data.batches if b.batch_id == doc.batch_id]
    if not records:
        print(f"{doc.doc_id}@v{doc.version}: no audit record for batch {doc.batch_id!r}",
              file=sys.stderr)
        return 1
    batch = next((b for b in records if check(b, known) is None), records[0])
    return _print_proof(args, proof_document(doc, batch, data.anchors,
                                             chain_reader(ledger, data.anchors), known))


def prove_from_record(args: argparse.Namespace, data: Loaded, ledger: LedgerSettings,
                      known: frozenset[str]) -> int:
    """The proof of a document whose redacted text is no longer held (forgotten on a
    deletion request, or past retention): its leaf, from the newest authentic audit record
    that holds it, proves what was ingested and redacted; only the text cannot be shown."""
    held = [(leaf.version, b) for b in data.batches if check(b, known) is None
            for leaf in b.leaves if leaf.doc_id == args.doc_id
            and args.version in (None, leaf.version)]
    if not held:
        print(f"{args.doc_id}: no such document on {DOCS_REDACTED.name} nor in any authentic "
              f"audit record on {AUDIT_BATCHES.name}", file=sys.stderr)
        return 2
    version, batch = max(held, key=lambda vb: vb[0])
    return _print_proof(args, proof_document(None, batch, data.anchors,
                                             chain_reader(ledger, data.anchors), known,
                                             doc_id=args.doc_id, version=version))


def _print_proof(args: argparse.Namespace, out: dict[str, Any]) -> int:
    print(json.dumps(out, indent=2) if args.json else render_proof(out))
    # A text not held is no failure: the leaf commits to its hash, and the leaf is proven.
    return 0 if all(v for v in out["checks"].values() if v is not None) else 1


def proof_document(doc: RedactedDocument | None, batch: AuditBatch, anchors: list[Anchor],
                   on_chain_of: Callable[[str], OnChain | None],
                   known: frozenset[str], *, doc_id: str = "", version: int = 0,
                   ) -> dict[str, Any]:
    """Everything a third party needs to check the document without this project; with
    `doc` None (its text no longer held), everything but the text, for `doc_id`@`version`."""
    doc_id, version = (doc.doc_id, doc.version) if doc else (doc_id, version)
    proof = prove(batch, doc_id, version)
    on_chain = on_chain_of(batch.batch_id)
    # The latest announcement wins: a re-anchored batch is announced again.
    anchor = next((a for a in reversed(anchors) if a.batch_id == batch.batch_id), None)
    leaf_bytes = canonical(proof.leaf)
    # Exactly what the leaf's redacted hash covers (audit.content_sha256): with labels,
    # the proof shows who could read the version as well as what it said.
    content = (None if doc is None else sealed_content(doc) if doc.sealed else
               [doc.title, doc.text, sorted(doc.metadata.items()),
                *([list(doc.acl)] if doc.acl else [])])
    return {
        "doc_id": doc_id, "version": version, "batch_id": batch.batch_id,
        "batch_key": hashlib.sha256(batch.batch_id.encode("utf-8")).hexdigest(),
        "partition": batch.partition, "leaf_index": proof.index, "tree_size": proof.size,
        "leaf": proof.leaf.model_dump(), "leaf_bytes": leaf_bytes.decode("utf-8"),
        "leaf_bytes_hex": leaf_bytes.hex(), "leaf_hash": proof.leaf_hash,
        "path": list(proof.path), "root": proof.root, "prev_root": batch.prev_root,
        "redacted_content": content, "text_held": doc is not None,
        # The version is a forget's receipt (shared/contract/forget.py): what was forgotten,
        # when, by whose request, which keys went.
        "forgotten": read_receipt(doc.metadata) if doc is not None and is_forget(doc) else None,
        # Sealed under a data key: the content above is the sealed bytes the leaf covers.
        "sealed_under": doc.key_id if doc is not None and doc.sealed else None,
        "signer": batch.signer, "signature": batch.signature,
        "record_digest": digest(batch).hex(),
        "record_signed_bytes": signed_bytes(batch).decode("utf-8"),
        "contract": anchor.contract if anchor else None,
        "chain_id": anchor.chain_id if anchor else None,
        "tx_hash": anchor.tx_hash if anchor else None,
        "block_number": anchor.block_number if anchor else None,
        "anchor": anchor.model_dump() if anchor else None,
        "on_chain": None if on_chain is None else {
            "root": on_chain[0], "prev_root": on_chain[1], "leaf_count": on_chain[2],
            "signer": on_chain[3]},
        "checks": {
            "proof_holds": proof.holds(),
            # None: no text to hash (not held); the leaf's hash of it is what is proven.
            "redacted_matches_leaf": None if doc is None else
                document_sha256(doc) == proof.leaf.redacted_sha256,
            "signed_by_known_signer": check(batch, known) is None,
            "anchor_on_chain_matches": on_chain is not None and not check_anchor(batch, on_chain),
        },
    }


def render_proof(p: dict[str, Any]) -> str:
    def mark(ok: bool) -> str:
        return "ok" if ok else "FAILED"
    lines = [f"document  {p['doc_id']} v{p['version']}"]
    if (f := p.get("forgotten")) is not None:
        at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(f["at"]))
        expires = ("never (a topic with clear text keeps records for ever)"
                   if f["raw_expires_by"] is None else
                   time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(f["raw_expires_by"])))
        lines += [f"forgotten at {at}, receipt {f['request_id']} (asked by "
                  f"{f['requested_by'] or 'unnamed'}): keys of versions "
                  f"{', '.join(map(str, f['versions'])) or '(none held)'} destroyed "
                  f"({', '.join(f['keys_destroyed']) or 'none'}); the last clear copy (raw "
                  f"input, search replies, drift telemetry) expires by {expires}; this "
                  "version is the "
                  "receipt:"]
    leaf = p["leaf"]
    keyed = (f"sha256 sealed redacted {leaf['redacted_sha256'][:16]}.., hmac raw "
             f"{leaf['raw_sha256'][:16]}.., key id {leaf['key_id']}" if leaf.get("key_id") else
             f"sha256 redacted {leaf['redacted_sha256'][:16]}.., "
             f"sha256 raw {leaf['raw_sha256'][:16]}..")
    lines += [
        f"batch     {p['batch_id']} (partition {p['partition']}, {p['tree_size']} leaves)",
        f"leaf      #{p['leaf_index']} {p['leaf_hash']}",
        f"          = H(0x00 || [doc id, version, {keyed}])",
        "path      RFC 6962 audit path, leaf to root:"]
    lines += [f"          {i + 1}. {h}" for i, h in enumerate(p["path"])] or ["          (none)"]
    checks = p["checks"]
    lines += [f"root      {p['root']} (proof {mark(checks['proof_holds'])})",
              f"redacted  document on {DOCS_REDACTED.name} hashes to the leaf: "
              f"{mark(checks['redacted_matches_leaf'])}" if p["text_held"] else
              f"redacted  text not held on {DOCS_REDACTED.name} (forgotten or past "
              "retention): its hash in the leaf is proven, the text cannot be shown",
              f"signed    by {p['signer'] or '(nobody)'}: "
              f"{mark(checks['signed_by_known_signer'])}"]
    a = p["anchor"]
    lines.append(f"anchor    tx {a['tx_hash']} block {a['block_number']} contract {a['contract']} "
                 f"chain {a['chain_id']}" if a else "anchor    none announced on "
                 f"{LEDGER_ANCHORS.name}")
    lines.append("on chain  root, prev_root, leaf count and signer: "
                 f"{mark(checks['anchor_on_chain_matches'])}")
    return "\n".join(lines)


@dataclass
class ChainView:
    """Every anchor of the known signers on the contracts read; none read: no contract known."""

    contracts: list[str]
    anchors: list[ChainAnchor]


def read_chain(ledger: LedgerSettings, announced: list[Anchor], known: frozenset[str],
               contract: str | None) -> ChainView:
    contracts = contracts_to_read(contract or "", ledger.contract_address,
                                  recorded_contract(ProcessSettings().data_dir),
                                  *(a.contract for a in reversed(announced)))
    if not contracts:
        return ChainView([], [])
    w3 = Web3(Web3.HTTPProvider(ledger.rpc_url))
    return ChainView(contracts, read_anchors(w3, contracts, known))


def run_verify(args: argparse.Namespace, kafka: KafkaSettings, ledger: LedgerSettings) -> int:
    evidence = read_evidence(kafka)
    # Redaction's committed offsets before the audit records: what a commit passed has its
    # audit record or dead letter on the broker already, so the reads below hold it.
    try:
        commits, refused = read_commits(kafka), ""
    except RefusedError as exc:
        commits, refused = {}, f"committed offsets not read: {exc}"
    data = load(kafka)
    known = known_signers(args)
    chain = read_chain(ledger, data.anchors, known, args.contract)
    report = verify(data.docs, data.batches, chain_reader(ledger, data.anchors), known,
                    chain.anchors, [a.batch_id for a in data.anchors],
                    TextRetention(evidence.text_retention_ms, time.time()))
    inputs = (Coverage(not_checked=refused) if refused else
              read_coverage(kafka, commits, data.batches, report, known))
    reasons = failures(report, data.unreadable, chain, inputs)
    # Never "all verified" without the chain: with no contract known, an empty topic
    # cannot tell a fresh deployment from one whose evidence is all gone.
    ok = not reasons
    if args.json:
        print(json.dumps({"ok": ok, "reasons": reasons, "orphans": report.orphans,
                          "forget_receipts": sorted({d.metadata[REQUEST] for d in data.docs
                                                     if is_forget(d)}),
                          "unreadable": data.unreadable,
                          "redelivered_docs": report.redelivered_docs,
                          "unprovable": [asdict(u) for u in report.unprovable],
                          "chain": {"contracts": chain.contracts,
                                    "anchors": report.chain_anchors},
                          "inputs": coverage_json(inputs),
                          "batches": [{**asdict(b), "result": b.result}
                                      for b in report.batches]}, indent=2))
        return 0 if ok else 1
    print(render_verify(report, data.unreadable, chain, inputs))
    if receipts := len({d.metadata[REQUEST] for d in data.docs if is_forget(d)}):
        print(f"{receipts} forget receipts among the leaves above: their documents' earlier "
              "versions are sealed under destroyed keys (`streamrag audit prove DOC` shows "
              "each receipt)")
    return 0 if ok else 1


def failures(report: Report, unreadable: list[str], chain: ChainView,
             inputs: Coverage) -> list[str]:
    """Why verify fails, as codes for scripts (none: it passes)."""
    return [code for code, failed in (
        ("batch_failed", any(b.result == "failed" for b in report.batches)),
        ("unprovable", bool(report.unprovable)
         or any(b.result == "unprovable" for b in report.batches)),
        ("orphan_documents", bool(report.orphans)),
        ("unreadable_records", bool(unreadable)),
        ("no_contract", not chain.contracts),
        ("lost_inputs", bool(inputs.lost))) if failed]


def render_verify(report: Report, unreadable: list[str], chain: ChainView,
                  inputs: Coverage) -> str:
    width = max([len(b.batch_id) for b in report.batches] + [5])
    lines = [f"{'batch':<{width}} {'part':>4} {'docs':>5}  result"]
    for b in report.batches:
        again = f" ({b.redelivered} redelivered copies)" if b.redelivered else ""
        result = ("ok" + again if b.result == "ok" else
                  f"expired: {len(b.expired)} redacted texts past their retention, leaves "
                  "proven by the signed record" + again if b.result == "expired" else
                  "; ".join(b.problems) if b.problems else
                  f"unprovable: evidence missing: {len(b.missing)} redacted documents gone "
                  f"({', '.join(b.missing)})")
        lines.append(f"{b.batch_id:<{width}} {b.partition:>4} {b.docs:>5}  {result}")
    lines += [f"orphan: {orphan}" for orphan in report.orphans]
    lines += [f"unreadable: {bad_record}" for bad_record in unreadable]
    lines += [f"unprovable: evidence missing: batch {u.batch_id} (block {u.block_number}, "
              f"tx {u.tx_hash}): {u.missing}" for u in report.unprovable]
    lines += describe(inputs)
    lines.append(f"chain: {report.chain_anchors} anchors of the known signers on "
                 f"{', '.join(chain.contracts)}" if chain.contracts else
                 "chain: NOT READ: no AuditAnchor contract known (set "
                 "STREAMRAG_LEDGER_CONTRACT_ADDRESS or --contract)")
    failed = (sum(b.result == "failed" for b in report.batches) + bool(report.orphans)
              + len(unreadable) + (not chain.contracts))
    unprovable = len(report.unprovable) + sum(
        b.result == "unprovable" and b.block_number is None for b in report.batches)
    verdict = [f"{failed} FAILED"] if failed else []
    verdict += [f"{unprovable} UNPROVABLE (evidence missing)"] if unprovable else []
    verdict += [f"{len(inputs.lost)} LOST (inputs committed past with neither an audit leaf "
                "nor a dead letter)"] if inputs.lost else []
    expired = sum(b.result == "expired" for b in report.batches)
    held = (f" ({expired} with their texts past retention, proven by their records)"
            if expired else "")
    lines.append(f"\n{len(report.batches)} batches{held}, "
                 f"{sum(b.docs for b in report.batches)} "
                 f"documents, {report.redelivered_docs} redelivered copies of unfinished "
                 "batches: " + (", ".join(verdict) if verdict else
                                "signatures, roots, chain and anchors all verified"
                                + ("; inputs NOT RECONCILED" if inputs.not_checked else
                                   ", every input audited or dead-lettered")))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--signer", action="append", default=[],
                        help="an address whose audit signatures count (repeatable); "
                        "default: STREAMRAG_AUDIT_SIGNERS")
    parser = argparse.ArgumentParser(prog="streamrag audit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", parents=[common],
                       help="inclusion proof and anchor of one document")
    p.add_argument("doc_id")
    p.add_argument("--version", type=int, default=None, help="default: the newest")
    v = sub.add_parser("verify", parents=[common],
                       help="recompute every batch root, check chain and anchors")
    v.add_argument("--contract", default=None,
                   help="the AuditAnchor address whose anchors must all be provable; default: "
                   "STREAMRAG_LEDGER_CONTRACT_ADDRESS, the ledger's deployment record, and "
                   "every contract ledger.anchors.v1 names")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = run_prove if args.command == "prove" else run_verify
    kafka = KafkaSettings()
    try:
        if args.command == "prove":
            read_evidence(kafka)
        return run(args, kafka, LedgerSettings())
    except EvidenceError as exc:
        print(f"streamrag audit {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
