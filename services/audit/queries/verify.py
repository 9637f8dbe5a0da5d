"""Check every anchored query batch against the topic and the chain (pure logic).

For each announced query batch: its leaves re-derived from audit.queries.v1 (the records
at its offsets its signer signed) must be as many as announced and hash to the announced
root; the chain must hold the same root, prev_root, leaf count and signer; and its
prev_root must be the root of a batch before it on its partition's chain (per epoch), or
the genesis root for the chain's first.
Authentic audits that no batch covers are listed apart: not yet anchored, or never.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shared.contract.query_audit import (
    GENESIS_ROOT,
    batch_root,
    members,
    parse_batch_id,
    signed_by,
)
from shared.contract.records import Anchor, QueryAudit

OnChain = tuple[str, str, int, str]  # root, prev_root (bare hex), leaf count, signer
Located = tuple[int, int, QueryAudit]  # partition, offset, record


@dataclass
class BatchCheck:
    batch_id: str
    leaves: int
    problems: list[str] = field(default_factory=list)


@dataclass
class QueryReport:
    batches: list[BatchCheck]
    unanchored: list[str]  # "<query id> (partition p offset o)" of authentic audits

    @property
    def ok(self) -> bool:
        return all(not b.problems for b in self.batches)


def verify_queries(audits: list[Located], anchors: list[Anchor],
                   on_chain_of: Callable[[str, str], OnChain | None],
                   known: frozenset[str]) -> QueryReport:
    latest = {a.batch_id: a for a in anchors}  # a re-anchored batch: its newest announcement
    named = sorted(((n, a) for a in latest.values() if (n := parse_batch_id(a.batch_id))),
                   key=lambda na: (na[0].epoch, na[0].partition, na[0].first))
    checks: list[BatchCheck] = []
    ends: dict[tuple[str, int], list[tuple[int, str]]] = {}  # (last offset, root) per chain
    covered: set[tuple[int, int]] = set()
    for name, anchor in named:
        leaves = members(((o, a) for p, o, a in audits if p == name.partition),
                         name.first, name.last, anchor.signer or "")
        covered |= {(name.partition, o) for o, _ in leaves}
        check = BatchCheck(anchor.batch_id, len(leaves))
        if len(leaves) != anchor.leaf_count:
            check.problems.append(f"{len(leaves)} authentic audits at its offsets, "
                                  f"{anchor.leaf_count} anchored")
        elif batch_root([a for _, a in leaves]) != anchor.root:
            check.problems.append("its audits on the topic hash to another root")
        # A link to a batch of its chain that ended before it (two workers racing over the
        # same offsets both link to the batch before them), or to genesis for the first.
        before = {root for last, root in ends.get((name.epoch, name.partition), [])
                  if last < name.first} or {GENESIS_ROOT}
        if (anchor.prev_root or GENESIS_ROOT) not in before:
            check.problems.append("prev_root is the root of no batch before it on its "
                                  "partition's chain")
        ends.setdefault((name.epoch, name.partition), []).append((name.last, anchor.root))
        chain = on_chain_of(anchor.contract, anchor.batch_id)
        if chain is None:
            check.problems.append("not on chain")
        elif chain != (anchor.root, anchor.prev_root or "", anchor.leaf_count,
                       chain[3]) or chain[3].lower() != (anchor.signer or "").lower():
            check.problems.append("the chain holds another root, prev_root, leaf count or "
                                  "signer")
        checks.append(check)
    unanchored = [f"{a.query_id} (partition {p} offset {o})" for p, o, a in audits
                  if (p, o) not in covered and any(signed_by(a, s) for s in known)]
    return QueryReport(checks, unanchored)
