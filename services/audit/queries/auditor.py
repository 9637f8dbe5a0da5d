"""`streamrag audit prove --query QUERY_ID` and `streamrag audit queries`: who was shown what.

Run as `python -m services.audit.queries.auditor prove QUERY_ID` (what `streamrag audit prove
--query` runs). It reads audit.queries.v1 and ledger.anchors.v1 from the beginning with a
plain consumer, finds the anchored query batch whose offsets hold the record, re-derives
that batch's leaves from the topic (the records at its offsets its signer signed, in offset
order: shared/contract/query_audit.py), and checks the record's signature, its inclusion
proof, the batch's leaf count and root against the announcement, and the anchor on chain
(AuditAnchor.anchors(sha256(batch id))). Exit 0: every check holds; 1: one fails (or the
record was never anchored); 2: no record has that query id.

`streamrag audit verify --queries` checks every anchored query batch
(services/audit/queries/verify.py). `streamrag audit queries --subject S | --principal HASH |
--question TEXT` lists the query
audits of a caller (its subject hashed under STREAMRAG_AUDIT_PRINCIPAL_KEY, which the
auditor holds) or of a question (its sha256): the ids to prove.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from web3 import Web3

from services.audit.onchain import ANCHORS_ABI
from services.audit.queries.verify import verify_queries
from shared.contract.audit_signing import AuditSignerSettings, check, digest, signed_bytes
from shared.contract.codec import decode
from shared.contract.query_audit import (
    AuditPrincipalSettings,
    leaf_bytes,
    members,
    parse_batch_id,
    principal_hash,
    prove,
    question_sha256,
)
from shared.contract.records import Anchor, QueryAudit
from shared.contract.topics import AUDIT_QUERIES, LEDGER_ANCHORS
from shared.errors import InvalidInput
from shared.kafka.reader import read_topic
from shared.settings import KafkaSettings, LedgerSettings

OnChain = tuple[str, str, int, str]  # root, prev_root (bare hex), leaf count, signer
ChainRead = Callable[[str, str], OnChain | None]  # (contract, batch id) -> anchor or None


@dataclass(frozen=True)
class Located:
    partition: int
    offset: int
    audit: QueryAudit


def decoded(records: list[Any]) -> list[Located]:
    out = []
    for r in records:
        try:
            out.append(Located(r.partition, r.offset, decode(QueryAudit, r.value)))
        except InvalidInput:
            continue  # not a query audit: no leaf of any batch (the ledger dead-lettered it)
    return out


def query_anchors(anchors: list[Anchor]) -> list[Anchor]:
    """The newest announcement of each query batch (a re-anchored batch is announced again)."""
    latest = {a.batch_id: a for a in anchors if parse_batch_id(a.batch_id) is not None}
    return list(latest.values())


def covering(found: Located, anchors: list[Anchor]) -> Anchor | None:
    for a in anchors:
        name = parse_batch_id(a.batch_id)
        if (name is not None and name.partition == found.partition
                and name.first <= found.offset <= name.last):
            return a
    return None


def proof_of(found: Located, audits: list[Located], anchor: Anchor | None,
             on_chain_of: ChainRead, known: frozenset[str]) -> dict[str, Any]:
    """Everything a third party needs to check the record, and the checks' outcomes."""
    audit = found.audit
    out: dict[str, Any] = {
        "query_id": audit.query_id, "record": audit.model_dump(mode="json"),
        "partition": found.partition, "offset": found.offset,
        "leaf_bytes": leaf_bytes(audit).decode("utf-8"),
        "signer": audit.signer, "signature": audit.signature,
        "record_digest": digest(audit).hex(),
        "record_signed_bytes": signed_bytes(audit).decode("utf-8"),
        "batch_id": None, "anchor": None, "on_chain": None,
    }
    checks = {"signed_by_known_signer": check(audit, known) is None, "anchored": False,
              "proof_holds": False, "leaf_count_matches": False,
              "anchor_on_chain_matches": False}
    out["checks"] = checks
    if anchor is None:
        return out
    name = parse_batch_id(anchor.batch_id)
    assert name is not None
    signer = anchor.signer or ""
    leaves = members(((a.offset, a.audit) for a in audits if a.partition == found.partition),
                     name.first, name.last, signer)
    index = next((i for i, (o, _) in enumerate(leaves) if o == found.offset), None)
    checks["anchored"] = True
    out.update(batch_id=anchor.batch_id,
               batch_key=hashlib.sha256(anchor.batch_id.encode("utf-8")).hexdigest(),
               anchor=anchor.model_dump(mode="json"), contract=anchor.contract,
               chain_id=anchor.chain_id, tx_hash=anchor.tx_hash,
               block_number=anchor.block_number, tree_size=len(leaves))
    checks["leaf_count_matches"] = len(leaves) == anchor.leaf_count
    if index is not None:
        proof = prove([a for _, a in leaves], index)
        out.update(leaf_index=index, leaf_hash=proof.leaf_hash, path=list(proof.path),
                   root=proof.root)
        checks["proof_holds"] = proof.holds_for(audit) and proof.root == anchor.root
    chain = on_chain_of(anchor.contract, anchor.batch_id)
    if chain is not None:
        out["on_chain"] = {"root": chain[0], "prev_root": chain[1], "leaf_count": chain[2],
                           "signer": chain[3]}
        checks["anchor_on_chain_matches"] = (
            chain[0] == anchor.root and chain[1] == (anchor.prev_root or "")
            and chain[2] == anchor.leaf_count and chain[3].lower() == signer.lower())
    return out


def best_proof(query_id: str, audits: list[Located], anchors: list[Anchor],
               on_chain_of: ChainRead, known: frozenset[str]) -> dict[str, Any] | None:
    """The proof of the record with this id that holds, else of the first copy; None: no
    record has the id. A forged copy never passes for the authentic one and vice versa."""
    mine = [a for a in audits if a.audit.query_id == query_id]
    if not mine:
        return None
    batches = query_anchors(anchors)
    proofs = [proof_of(m, audits, covering(m, batches), on_chain_of, known) for m in mine]
    chosen = next((p for p in proofs if all(p["checks"].values())), proofs[0])
    chosen["copies"] = len(mine)
    return chosen


def chain_reader(ledger: LedgerSettings) -> ChainRead:
    w3 = Web3(Web3.HTTPProvider(ledger.rpc_url))

    def read(contract: str, batch_id: str) -> OnChain | None:
        address = contract or ledger.contract_address
        if not address:
            return None
        c = w3.eth.contract(address=Web3.to_checksum_address(address), abi=ANCHORS_ABI)
        key = hashlib.sha256(batch_id.encode("utf-8")).digest()
        root, prev, count, block, signer = c.functions.anchors(key).call()
        return None if block == 0 else (bytes(root).hex(), bytes(prev).hex(), int(count),
                                        str(signer))
    return read


def render(p: dict[str, Any]) -> str:
    def mark(ok: bool) -> str:
        return "ok" if ok else "FAILED"
    r, checks = p["record"], p["checks"]
    copies = p.get("copies", 1)
    again = f" ({copies} records carry this id)" if copies > 1 else ""
    lines = [f"query     {p['query_id']} ({r['method']}, {r['principal_kind']}"
             f"{' ' + r['principal'] if r['principal'] else ''}, at {r['at']:.3f})",
             f"record    {AUDIT_QUERIES.name} partition {p['partition']} offset {p['offset']}"
             f"{again}",
             f"question  sha256 {r['question_sha256']}",
             f"shown     {', '.join(r['shown']) or '(nothing)'}",
             f"docs      {', '.join(r['docs']) or '(none)'}",
             f"cited     {', '.join(r['cited']) or '(none)'}  mode {r['answer_mode'] or '-'}",
             f"signed    by {p['signer'] or '(nobody)'}: "
             f"{mark(checks['signed_by_known_signer'])}"]
    if not checks["anchored"]:
        lines.append(f"anchor    FAILED: no anchored query batch on {LEDGER_ANCHORS.name} "
                     "holds this record")
        return "\n".join(lines)
    lines.append(f"batch     {p['batch_id']} ({p['tree_size']} leaves; leaf count "
                 f"{mark(checks['leaf_count_matches'])})")
    if "leaf_index" in p:
        lines.append(f"leaf      #{p['leaf_index']} {p['leaf_hash']}")
        lines.append("path      RFC 6962 audit path, leaf to root:")
        lines += [f"          {i + 1}. {h}" for i, h in enumerate(p["path"])] or \
            ["          (none)"]
        lines.append(f"root      {p['root']} (proof {mark(checks['proof_holds'])})")
    else:
        lines.append("leaf      FAILED: the record is not a leaf of the batch (not signed by "
                     "its signer)")
    lines.append(f"anchor    tx {p['tx_hash']} block {p['block_number']} contract "
                 f"{p['contract']} chain {p['chain_id']}")
    lines.append("on chain  root, prev_root, leaf count and signer: "
                 f"{mark(checks['anchor_on_chain_matches'])}")
    return "\n".join(lines)


def load(kafka: KafkaSettings) -> tuple[list[Any], list[Anchor]]:
    """The records of audit.queries.v1 and the announcements on ledger.anchors.v1."""
    async def go() -> tuple[list[Any], list[Any]]:
        return (await read_topic(kafka, AUDIT_QUERIES),
                await read_topic(kafka, LEDGER_ANCHORS))
    records, announced = asyncio.run(go())
    anchors = []
    for r in announced:
        try:
            anchors.append(decode(Anchor, r.value))
        except InvalidInput:
            continue
    return records, anchors


def run_prove(args: argparse.Namespace, kafka: KafkaSettings, ledger: LedgerSettings) -> int:
    records, anchors = load(kafka)
    known = (frozenset(s.lower() for s in args.signer) if args.signer
             else AuditSignerSettings().known_query())
    proof = best_proof(args.query_id, decoded(records), anchors, chain_reader(ledger), known)
    if proof is None:
        print(f"{args.query_id}: no query audit with this id on {AUDIT_QUERIES.name}",
              file=sys.stderr)
        return 2
    print(json.dumps(proof, indent=2) if args.json else render(proof))
    return 0 if all(proof["checks"].values()) else 1


def matching(audits: list[Located], principal: str | None = None,
             question: str | None = None) -> list[Located]:
    """The audits of `principal` (its recorded hash) and/or of `question` (its sha256), in
    topic order; a forged record is listed too (prove tells them apart)."""
    sha = None if question is None else question_sha256(question)
    return [a for a in audits if principal in (None, a.audit.principal)
            and sha in (None, a.audit.question_sha256)]


def render_list(found: list[Located]) -> str:
    if not found:
        return "no query audit matches"
    lines = [f"{'query id':<32} {'at':>14} {'method':<11} {'caller':<9} shown cited  docs"]
    for f in found:
        a = f.audit
        lines.append(f"{a.query_id:<32} {a.at:>14.3f} {a.method:<11} {a.principal_kind:<9} "
                     f"{len(a.shown):>5} {len(a.cited):>5}  {', '.join(a.docs)}")
    return "\n".join(lines)


def run_queries(args: argparse.Namespace, kafka: KafkaSettings) -> int:
    principal = (principal_hash(args.subject, AuditPrincipalSettings().principal_key)
                 if args.subject else args.principal)
    if principal is None and args.question is None:
        print("name a caller (--subject or --principal) or a --question", file=sys.stderr)
        return 2
    records = asyncio.run(read_topic(kafka, AUDIT_QUERIES))
    found = matching(decoded(records), principal, args.question)
    if args.json:
        print(json.dumps([{"query_id": f.audit.query_id, "partition": f.partition,
                           "offset": f.offset, "record": f.audit.model_dump(mode="json")}
                          for f in found], indent=2))
    else:
        print(render_list(found))
    return 0


def run_verify(args: argparse.Namespace, kafka: KafkaSettings, ledger: LedgerSettings) -> int:
    records, anchors = load(kafka)
    known = (frozenset(s.lower() for s in args.signer) if args.signer
             else AuditSignerSettings().known_query())
    report = verify_queries([(a.partition, a.offset, a.audit) for a in decoded(records)],
                            anchors, chain_reader(ledger), known)
    if args.json:
        print(json.dumps({"ok": report.ok, "batches": [asdict(b) for b in report.batches],
                          "unanchored": report.unanchored}, indent=2))
    else:
        for b in report.batches:
            print(f"{b.batch_id}  {b.leaves} audits  "
                  f"{'; '.join(b.problems) if b.problems else 'ok'}")
        print(f"{len(report.unanchored)} authentic audits in no anchored batch (yet)"
              + (f": {', '.join(report.unanchored[:10])}" if report.unanchored else ""))
        failed = sum(bool(b.problems) for b in report.batches)
        print(f"\n{len(report.batches)} query batches: "
              + (f"{failed} FAILED" if failed else "roots, leaf counts, chain and anchors "
                 "all verified"))
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamrag audit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="inclusion proof and anchor of one query audit")
    p.add_argument("--query", dest="query_id", required=True, help="the query id")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--signer", action="append", default=[],
                   help="an address whose query-audit signatures count (repeatable); "
                   "default: STREAMRAG_AUDIT_QUERY_SIGNERS")
    v = sub.add_parser("verify", help="every anchored query batch against the topic and "
                       "the chain")
    v.add_argument("--queries", action="store_true", required=True,
                   help="the query batches (documents: streamrag audit verify)")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.add_argument("--signer", action="append", default=[],
                   help="an address whose query-audit signatures count (repeatable)")
    q = sub.add_parser("queries", help="the query audits of a caller or a question")
    who = q.add_mutually_exclusive_group()
    who.add_argument("--subject", help="the caller's token subject (hashed here with "
                     "STREAMRAG_AUDIT_PRINCIPAL_KEY, never sent anywhere)")
    who.add_argument("--principal", help="the recorded hash itself (hmac-sha256:...)")
    q.add_argument("--question", help="the exact question (matched by its sha256)")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "queries":
        return run_queries(args, KafkaSettings())
    if args.command == "verify":
        return run_verify(args, KafkaSettings(), LedgerSettings())
    return run_prove(args, KafkaSettings(), LedgerSettings())


if __name__ == "__main__":
    sys.exit(main())
