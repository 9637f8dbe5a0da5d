"""Whether the node is the chain a deployment was recorded on (another_chain), on fakes of
what the node answers: the genesis hash plays no part, since anvil restarted from its state
file can report another one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.ledger.deployment import Deployment, Seen, another_chain

ADDRESS = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
CODE = b"\x60\x80" * 10
TX, BLOCK = "0x" + "aa" * 32, "0x" + "bb" * 32
KNOWN = Deployment(31337, "0x" + "01" * 32, ADDRESS, "sha", TX, BLOCK)
SAME = Seen(31337, CODE, CODE, (ADDRESS.lower(), BLOCK), has_block=True)


@pytest.mark.parametrize("known, seen", [
    (KNOWN, SAME),
    (replace(KNOWN, genesis_hash="0x" + "02" * 32), SAME),  # anvil reported another genesis
    (KNOWN, replace(SAME, receipt=None)),  # a node that dropped its tx index keeps the block
    (replace(KNOWN, tx_hash="", block_hash=""), replace(SAME, receipt=None, has_block=False)),
], ids=["all-match", "other-genesis", "no-tx-index", "older-record"])
def test_the_same_chain(known: Deployment, seen: Seen) -> None:
    assert another_chain(known, seen) == ""


@pytest.mark.parametrize("known, seen, why", [
    (KNOWN, replace(SAME, chain_id=1), "chain id 1, not 31337"),
    (KNOWN, replace(SAME, code=b""), f"no contract at {ADDRESS}"),
    (KNOWN, replace(SAME, expected_code=b"\x00"), "holds other code"),
    (KNOWN, replace(SAME, expected_code=b""), "holds other code"),  # no OWNER() to call
    (KNOWN, replace(SAME, receipt=("0x" + "cc" * 20, BLOCK)), f"created 0x{'cc' * 20}"),
    (KNOWN, replace(SAME, receipt=(ADDRESS, "0x" + "dd" * 32)),  # a fresh dev chain replayed
     f"is in block 0x{'dd' * 32}, not {BLOCK}"),                 # the deployment
    (KNOWN, replace(SAME, receipt=None, has_block=False), f"nor its block {BLOCK}"),
    (replace(KNOWN, tx_hash="", block_hash=""), replace(SAME, code=b""), "no contract"),
], ids=["chain-id", "no-code", "other-code", "not-auditanchor", "other-address",
        "other-block", "no-deployment", "older-record-no-code"])
def test_another_chain(known: Deployment, seen: Seen, why: str) -> None:
    assert why in another_chain(known, seen)
