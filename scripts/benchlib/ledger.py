"""Anchor latency and gas per document on a real anvil node; the cost of signed audit records.

Starts its own anvil (from .tools/) on a free port, deploys AuditAnchor through the ledger
service's AnchorClient and anchors batches of several sizes, one transaction per batch
(the service's only mode: roll-up of many roots into one transaction is not built). The
baseline is a batch of one document: the ratio shows what micro-batching saves per document.
A second table gives the extra cost per batch of signing the audit record (redaction) and
checking its signature (ledger, and `streamrag audit verify` per record) against the
unsigned baseline (building and encoding the record). Prints both tables and writes
bench-results/ledger.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from eth_keys.backends import get_backend
from pydantic import SecretStr

from scripts.benchlib.paths import ANVIL, RESULTS
from scripts.benchlib.stats import pct
from services.ledger.chain import AnchorClient
from services.ledger.settings import LedgerServiceSettings
from shared.contract.audit_batches import Tip, build_batch
from shared.contract.audit_signing import DEV_SIGNER, DEV_SIGNING_KEY, check, sign
from shared.contract.codec import decode, encode
from shared.contract.records import AuditBatch, AuditLeaf
from shared.settings import LedgerSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_anvil(port: int, state: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([str(ANVIL), "--port", str(port), "--state", str(state),
                             "--silent"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    for _ in range(300):
        try:
            if requests.post(f"http://127.0.0.1:{port}", json=body, timeout=1).ok:
                return proc
        except requests.ConnectionError:
            time.sleep(0.1)
    proc.kill()
    raise TimeoutError("anvil did not start")


def run(client: AnchorClient, size: int, batches: int, tag: str) -> dict[str, float]:
    latency, gas = [], []
    prev = ""
    for i in range(batches):
        root = hashlib.sha256(f"{tag}/{size}/{i}".encode()).hexdigest()
        closed = time.time()  # the batch's created_at in the service
        receipt = client.anchor(f"bench/{tag}/{size}/{i}", root, prev, size, signer=DEV_SIGNER)
        latency.append((receipt.anchored_at - closed) * 1000)
        tx = receipt.tx_hash  # the 0x-hex string web3 gave back (typed there as HexStr)
        gas.append(client.w3.eth.get_transaction_receipt(tx)["gasUsed"])  # type: ignore[arg-type]
        prev = root
    print(f"  batch size {size}: {batches} anchored", flush=True)
    return {"batches": batches, "docs_per_batch": size, "latency_p50_ms": pct(latency, 50),
            "latency_p95_ms": pct(latency, 95), "gas_per_tx": statistics.fmean(gas),
            "gas_per_doc": statistics.fmean(gas) / size}


def timed_us(fn: object, reps: int) -> float:
    """Median microseconds of fn() over reps calls."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def signing_cost(size: int, reps: int) -> dict[str, float]:
    """Per batch of `size` documents: build+encode (baseline), sign, decode+check."""
    leaves = [AuditLeaf(doc_id=f"doc-{i}", version=1, offset=i,
                        redacted_sha256=hashlib.sha256(f"r{i}".encode()).hexdigest(),
                        raw_sha256=hashlib.sha256(f"w{i}".encode()).hexdigest())
              for i in range(size)]
    key, known = SecretStr(DEV_SIGNING_KEY), frozenset({DEV_SIGNER.lower()})

    def build() -> AuditBatch:
        return build_batch("docs.normalized.v1", 0, (0, size - 1), leaves, [],
                           Tip.genesis("bench"), "fp")
    unsigned = build()
    signed = sign(unsigned, key)
    wire = encode(signed)
    assert check(decode(AuditBatch, wire), known) is None
    return {"docs_per_batch": size,
            "baseline_us": timed_us(lambda: encode(build()), reps),
            "sign_us": timed_us(lambda: sign(unsigned, key), reps),
            "check_us": timed_us(lambda: check(decode(AuditBatch, wire), known), reps),
            "decode_unsigned_us": timed_us(lambda: decode(AuditBatch, encode(unsigned)), reps),
            "bytes_unsigned": len(encode(unsigned)), "bytes_signed": len(wire)}


def print_signing(rows: list[dict[str, float]]) -> None:
    print(f"\nsigned audit records, per batch (median of runs; secp256k1 backend: "
          f"{type(get_backend()).__name__})")
    print(f"{'docs/batch':>10} {'baseline us':>12} {'+ sign us':>10} {'+ check us':>11} "
          f"{'(decode us)':>12} {'bytes':>7} {'+ bytes':>8}")
    for r in rows:
        print(f"{r['docs_per_batch']:>10} {r['baseline_us']:>12.0f} {r['sign_us']:>10.0f} "
              f"{r['check_us'] - r['decode_unsigned_us']:>11.0f} "
              f"{r['decode_unsigned_us']:>12.0f} {r['bytes_unsigned']:>7} "
              f"{r['bytes_signed'] - r['bytes_unsigned']:>8}")
    print("baseline = build + encode an unsigned record (what redaction did before); sign = "
          "redaction's extra work; check = the ledger's (and verify's) extra work per record, "
          "decoding excluded")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_ledger", description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--sign-reps", type=int, default=200)
    args = ap.parse_args()
    signing = [signing_cost(size, args.sign_reps) for size in args.sizes]
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"starting anvil on port {port} ...", flush=True)
        anvil = start_anvil(port, Path(tmp) / "state.json")
        try:
            client = AnchorClient.connect(
                LedgerSettings(rpc_url=f"http://127.0.0.1:{port}", confirmations=0),
                LedgerServiceSettings(data_dir=Path(tmp) / "data", poll_interval_s=0.01))
            rows = [run(client, size, args.batches, str(port)) for size in args.sizes]
        finally:
            anvil.terminate()
            anvil.wait(30)
    base = rows[0]
    print(f"\n{'docs/batch':>10} {'batches':>8} {'latency p50 ms':>15} {'p95 ms':>8} "
          f"{'gas/tx':>8} {'gas/doc':>9} {'gas/doc vs 1-doc batches':>25}")
    for r in rows:
        print(f"{r['docs_per_batch']:>10} {r['batches']:>8} {r['latency_p50_ms']:>15.1f} "
              f"{r['latency_p95_ms']:>8.1f} {r['gas_per_tx']:>8.0f} {r['gas_per_doc']:>9.0f} "
              f"{r['gas_per_doc'] / base['gas_per_doc']:>24.3f}x")
    print("one transaction per batch (anvil automine, 0 confirmations); latency = batch "
          "closed -> receipt confirmed, measured by the ledger client")
    print_signing(signing)
    out = RESULTS / "ledger.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"anchoring": rows, "signing": signing}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
