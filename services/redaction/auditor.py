"""`streamrag audit prove DOC_ID` and `streamrag audit verify`: read the topics and the chain.

Run as `python -m services.redaction.auditor` (what `streamrag audit` runs). It reads
docs.redacted.v1, audit.batches.v1 and ledger.anchors.v1 from the beginning with a plain
consumer (no group), and the AuditAnchor contract through any JSON-RPC node; the checks
themselves are services.redaction.verify and services.redaction.audit.prove.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from web3 import Web3

from services.redaction.audit import content_sha256, prove
from services.redaction.verify import OnChain, verify
from shared.codec import decode
from shared.records import Anchor, AuditBatch, RedactedDocument
from shared.settings import KafkaSettings, LedgerSettings
from shared.topics import AUDIT_BATCHES, DOCS_REDACTED, LEDGER_ANCHORS, TopicSpec

# The one view of services/ledger's AuditAnchor the auditor needs (a unit test keeps it
# equal to the committed ABI); anchors are keyed by sha256 of the batch id.
ANCHORS_ABI = [{"inputs": [{"name": "arg0", "type": "bytes32"}], "name": "anchors",
                "outputs": [{"components": [
                    {"name": "root", "type": "bytes32"}, {"name": "prev_root", "type": "bytes32"},
                    {"name": "leaf_count", "type": "uint256"},
                    {"name": "block_number", "type": "uint256"}], "name": "", "type": "tuple"}],
                "stateMutability": "view", "type": "function"}]


async def read_topic(bootstrap: str, spec: TopicSpec, idle_s: float) -> list[Any]:
    """Every record of `spec`, per partition in offset order.

    The embedded broker under-reports end offsets after batched produces, so reading goes
    on until the reported end is passed and nothing new arrived for idle_s.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=10)
    await consumer.start()
    try:
        parts = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        out: list[Any] = []
        quiet_since = time.monotonic()
        while True:
            got = await consumer.getmany(timeout_ms=100)
            for records in got.values():
                out += records
            if got:
                quiet_since = time.monotonic()
            behind = [tp for tp in parts if await consumer.position(tp) < ends[tp]]
            if not behind and time.monotonic() - quiet_since >= idle_s:
                return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        await consumer.stop()


def load(kafka: KafkaSettings, idle_s: float,
         ) -> tuple[list[RedactedDocument], list[AuditBatch], list[Anchor]]:
    async def go() -> tuple[list[Any], ...]:
        return tuple([await read_topic(kafka.bootstrap, spec, idle_s)
                      for spec in (DOCS_REDACTED, AUDIT_BATCHES, LEDGER_ANCHORS)])
    docs, batches, anchors = asyncio.run(go())
    return ([decode(RedactedDocument, r.value) for r in docs],
            [decode(AuditBatch, r.value) for r in batches],
            [decode(Anchor, r.value) for r in anchors])


def chain_reader(ledger: LedgerSettings, anchors: list[Anchor],
                 ) -> Callable[[str], OnChain | None]:
    """batch id -> what the contract holds for it (None: not anchored)."""
    address = ledger.contract_address or next((a.contract for a in anchors), "")
    if not address:
        return lambda batch_id: None
    w3 = Web3(Web3.HTTPProvider(ledger.rpc_url))
    contract = w3.eth.contract(address=Web3.to_checksum_address(address), abi=ANCHORS_ABI)

    def read(batch_id: str) -> OnChain | None:
        key = hashlib.sha256(batch_id.encode("utf-8")).digest()
        root, prev, count, block = contract.functions.anchors(key).call()
        return None if block == 0 else (root.hex(), prev.hex(), count)
    return read


def run_prove(args: argparse.Namespace, kafka: KafkaSettings, ledger: LedgerSettings) -> int:
    docs, batches, anchors = load(kafka, args.idle_s)
    mine = [d for d in docs if d.doc_id == args.doc_id and args.version in (None, d.version)]
    if not mine:
        print(f"{args.doc_id}: no such document on {DOCS_REDACTED.name}", file=sys.stderr)
        return 2
    doc = mine[-1]
    batch = next((b for b in batches if b.batch_id == doc.batch_id), None)
    if batch is None:
        print(f"{doc.doc_id}@v{doc.version}: no audit record for batch {doc.batch_id!r}",
              file=sys.stderr)
        return 1
    proof = prove(batch, doc.doc_id, doc.version)
    on_chain = chain_reader(ledger, anchors)(batch.batch_id)
    # The latest announcement wins: a re-anchored batch is announced again.
    anchor = next((a for a in reversed(anchors) if a.batch_id == batch.batch_id), None)
    out = {"doc_id": doc.doc_id, "version": doc.version, "batch_id": batch.batch_id,
           "partition": batch.partition, "leaf_index": proof.index, "tree_size": proof.size,
           "leaf": proof.leaf.model_dump(), "leaf_hash": proof.leaf_hash,
           "path": list(proof.path), "root": proof.root, "prev_root": batch.prev_root,
           "proof_holds": proof.holds(),
           "redacted_matches_leaf":
               content_sha256(doc.title, doc.text, doc.metadata) == proof.leaf.redacted_sha256,
           "anchor": anchor.model_dump() if anchor else None,
           "anchor_on_chain_matches": on_chain == (batch.root, batch.prev_root,
                                                   len(batch.leaves))}
    ok = out["proof_holds"] and out["redacted_matches_leaf"] and out["anchor_on_chain_matches"]
    print(json.dumps(out, indent=2) if args.json else render_proof(out))
    return 0 if ok else 1


def render_proof(p: dict[str, Any]) -> str:
    def mark(ok: bool) -> str:
        return "ok" if ok else "FAILED"
    lines = [f"document  {p['doc_id']} v{p['version']}",
             f"batch     {p['batch_id']} (partition {p['partition']}, {p['tree_size']} leaves)",
             f"leaf      #{p['leaf_index']} {p['leaf_hash']}",
             f"          = H(0x00 || [doc id, version, sha256 redacted "
             f"{p['leaf']['redacted_sha256'][:16]}.., "
             f"sha256 raw {p['leaf']['raw_sha256'][:16]}..])",
             "path      RFC 6962 audit path, leaf to root:"]
    lines += [f"          {i + 1}. {h}" for i, h in enumerate(p["path"])] or ["          (none)"]
    lines += [f"root      {p['root']} (proof {mark(p['proof_holds'])})",
              f"redacted  document on {DOCS_REDACTED.name} hashes to the leaf: "
              f"{mark(p['redacted_matches_leaf'])}"]
    a = p["anchor"]
    lines.append(f"anchor    tx {a['tx_hash']} block {a['block_number']} contract {a['contract']} "
                 f"chain {a['chain_id']}" if a else "anchor    none announced on "
                 f"{LEDGER_ANCHORS.name}")
    lines.append(f"on chain  root, prev_root and leaf count: {mark(p['anchor_on_chain_matches'])}")
    return "\n".join(lines)


def run_verify(args: argparse.Namespace, kafka: KafkaSettings, ledger: LedgerSettings) -> int:
    docs, batches, anchors = load(kafka, args.idle_s)
    report = verify(docs, batches, chain_reader(ledger, anchors))
    if args.json:
        print(json.dumps({"ok": report.ok, "orphans": report.orphans,
                          "batches": [asdict(b) for b in report.batches]}, indent=2))
        return 0 if report.ok else 1
    width = max([len(b.batch_id) for b in report.batches] + [5])
    print(f"{'batch':<{width}} {'part':>4} {'docs':>5}  result")
    for b in report.batches:
        print(f"{b.batch_id:<{width}} {b.partition:>4} {b.docs:>5}  "
              f"{'ok' if b.ok else '; '.join(b.problems)}")
    for orphan in report.orphans:
        print(f"orphan: {orphan}")
    bad = sum(not b.ok for b in report.batches) + bool(report.orphans)
    print(f"\n{len(report.batches)} batches, {sum(b.docs for b in report.batches)} documents: "
          + ("roots, chain and anchors all verified" if report.ok else f"{bad} FAILED"))
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--idle-s", type=float, default=1.0,
                        help="stop reading a topic after this long without new records")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    parser = argparse.ArgumentParser(prog="streamrag audit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", parents=[common],
                       help="inclusion proof and anchor of one document")
    p.add_argument("doc_id")
    p.add_argument("--version", type=int, default=None, help="default: the newest")
    sub.add_parser("verify", parents=[common],
                   help="recompute every batch root, check chain and anchors")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = run_prove if args.command == "prove" else run_verify
    return run(args, KafkaSettings(), LedgerSettings())


if __name__ == "__main__":
    sys.exit(main())
