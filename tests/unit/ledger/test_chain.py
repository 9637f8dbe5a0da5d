"""AnchorClient against an in-process chain: anchor, read back, replay, refuse, confirm."""

from __future__ import annotations

import pytest
from eth_account import Account
from pydantic import SecretStr
from web3 import Web3

from services.ledger.anchors import batch_key
from services.ledger.chain import AnchorClient
from services.ledger.errors import AnchorConflict, LedgerUnavailable
from services.ledger.settings import LedgerServiceSettings
from services.ledger.transactions import REVERTS, Sender
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.errors import ConfigError, InvalidInput
from shared.settings import LedgerSettings
from tests.unit.ledger.keys import INTRUDER_KEY

ROOT, PREV = "ab" * 32, "cd" * 32
BATCH = "docs.normalized.v1/2/100-163"


def events(client: AnchorClient) -> list[dict]:
    return [dict(e["args"], tx=e["transactionHash"].to_0x_hex())
            for e in client.contract.events.Anchored.get_logs(from_block=0)]


def test_anchor_stores_the_batch_and_emits_its_fields(client: AnchorClient) -> None:
    receipt = client.anchor(BATCH, "0x" + ROOT.upper(), "0x" + PREV, 64, signer=SIGNER)
    assert not receipt.already_anchored
    assert (receipt.root, receipt.prev_root, receipt.leaf_count) == (ROOT, PREV, 64)
    assert receipt.contract == client.contract.address and receipt.chain_id == client.chain_id
    stored = client.contract.functions.anchors(batch_key(BATCH)).call()
    assert stored == (bytes.fromhex(ROOT), bytes.fromhex(PREV), 64, receipt.block_number,
                      SIGNER)
    assert receipt.signer == SIGNER and receipt.record(0.0).signer == SIGNER
    assert events(client) == [{"batch_id": batch_key(BATCH), "root": bytes.fromhex(ROOT),
                               "prev_root": bytes.fromhex(PREV), "leaf_count": 64,
                               "signer": SIGNER, "tx": receipt.tx_hash}]
    assert client.contract.functions.batch_of_root(bytes.fromhex(ROOT)).call() == batch_key(BATCH)
    assert client.is_anchored(BATCH) and not client.is_anchored(BATCH + "x")


def test_a_replayed_anchor_returns_the_first_and_sends_nothing(client: AnchorClient) -> None:
    first = client.anchor(BATCH, ROOT, "", 3, signer=SIGNER)
    nonce = client.w3.eth.get_transaction_count(client.sender.address)
    again = client.anchor(BATCH, ROOT, "", 3, signer=SIGNER)
    assert again.already_anchored
    assert (again.tx_hash, again.block_number, again.root, again.prev_root) == (
        first.tx_hash, first.block_number, first.root, "00" * 32)
    assert client.w3.eth.get_transaction_count(client.sender.address) == nonce
    assert len(events(client)) == 1
    assert client.contract.functions.anchor_count().call() == 1


def test_the_contract_itself_reverts_a_duplicate(client: AnchorClient) -> None:
    client.anchor(BATCH, ROOT, "", 3, signer=SIGNER)
    call = client.contract.functions.anchor(batch_key(BATCH), bytes.fromhex(ROOT), bytes(32), 3,
                                            SIGNER)
    with pytest.raises(REVERTS, match="AuditAnchor: already anchored"):
        client.sender.send(call)
    assert len(events(client)) == 1


def test_a_replay_with_another_root_is_a_conflict_not_an_overwrite(client: AnchorClient) -> None:
    client.anchor(BATCH, ROOT, "", 3, signer=SIGNER)
    with pytest.raises(AnchorConflict) as info:
        client.anchor(BATCH, "ef" * 32, "", 3, signer=SIGNER)
    assert (info.value.reason, info.value.field) == ("anchored_root_differs", "root")
    assert client.contract.functions.anchors(batch_key(BATCH)).call()[0] == bytes.fromhex(ROOT)


@pytest.mark.parametrize(("prev", "count", "signer", "fields"), [
    ("cd" * 32, 3, SIGNER, ("prev_root",)),
    ("", 4, SIGNER, ("leaf_count",)),
    ("", 3, "0x" + "99" * 20, ("signer",)),
    ("cd" * 32, 5, SIGNER, ("prev_root", "leaf_count")),
])
def test_a_replay_that_differs_in_any_field_is_a_conflict_naming_it(
    client: AnchorClient, prev: str, count: int, signer: str, fields: tuple[str, ...],
) -> None:
    """The earlier bug: a batch id reused with the same root but another prev_root was
    adopted as "already on chain"."""
    client.anchor(BATCH, ROOT, "", 3, signer=SIGNER)
    with pytest.raises(AnchorConflict) as info:
        client.anchor(BATCH, ROOT, prev, count, signer=signer)
    assert info.value.fields == fields
    assert (info.value.reason, info.value.field) == (f"anchored_{fields[0]}_differs", fields[0])


def test_only_the_owner_may_anchor(client: AnchorClient, w3: Web3) -> None:
    intruder = Sender(w3, Account.from_key(INTRUDER_KEY), 0, 5, 0.01)
    call = client.contract.functions.anchor(batch_key(BATCH), bytes.fromhex(ROOT), bytes(32), 1,
                                            SIGNER)
    with pytest.raises(REVERTS, match="AuditAnchor: not owner"):
        intruder.send(call)
    assert not client.is_anchored(BATCH)


def test_connecting_with_another_key_fails_at_start(
    client: AnchorClient, w3: Web3, service: LedgerServiceSettings,
) -> None:
    other = LedgerSettings(private_key=SecretStr(INTRUDER_KEY))
    with pytest.raises(ConfigError, match="STREAMRAG_LEDGER_PRIVATE_KEY"):
        AnchorClient.connect(other, service, w3=w3)


@pytest.mark.parametrize(("root", "reason"), [("", "empty_root"), ("00" * 32, "empty_root"),
                                              ("xyz", "not_hex")])
def test_bad_roots_are_invalid_input_and_cost_nothing(
    client: AnchorClient, root: str, reason: str,
) -> None:
    nonce = client.w3.eth.get_transaction_count(client.sender.address)
    with pytest.raises(InvalidInput) as info:
        client.anchor(BATCH, root, "", 1, signer=SIGNER)
    assert info.value.reason == reason
    assert client.w3.eth.get_transaction_count(client.sender.address) == nonce


def test_waits_for_the_configured_confirmations(
    w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    # eth-tester mines only on demand: each poll "sleep" mines one block.
    polls: list[float] = []

    def mine(seconds: float) -> None:
        polls.append(seconds)
        w3.testing.mine(1)

    confirming = ledger.model_copy(update={"confirmations": 3})
    client = AnchorClient.connect(confirming, service, w3=w3, sleep=mine)
    polls.clear()
    receipt = client.anchor(BATCH, ROOT, "", 1, signer=SIGNER)
    assert w3.eth.block_number == receipt.block_number + 3
    assert polls == [service.poll_interval_s] * 3


def test_an_anchor_lost_to_a_reorg_is_anchored_again(client: AnchorClient, w3: Web3) -> None:
    snapshot = w3.testing.snapshot()
    lost = client.anchor(BATCH, ROOT, "", 1, signer=SIGNER)
    w3.testing.revert(snapshot)
    assert not client.is_anchored(BATCH)
    again = client.anchor(BATCH, ROOT, "", 1, signer=SIGNER)
    assert not again.already_anchored and client.is_anchored(BATCH)
    assert w3.eth.get_transaction_receipt(again.tx_hash)["status"] == 1
    assert again.block_number == lost.block_number


def test_a_reorg_while_confirming_is_not_reported_as_anchored(
    w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    snapshot: list[int] = []

    def reorg_then_mine(seconds: float) -> None:
        # The first wait drops the freshly mined anchor, as a reorg would.
        if snapshot:
            w3.testing.revert(snapshot.pop())
        w3.testing.mine(1)

    setup = AnchorClient.connect(ledger, service, w3=w3)
    hasty = service.model_copy(update={"receipt_timeout_s": 0.2})
    client = AnchorClient.connect(ledger.model_copy(update={"confirmations": 2}), hasty, w3=w3,
                                  sleep=reorg_then_mine)
    assert client.contract.address == setup.contract.address
    snapshot.append(w3.testing.snapshot())
    with pytest.raises(LedgerUnavailable, match="still unmined"):
        client.anchor(BATCH, ROOT, "", 1, signer=SIGNER)
    assert not client.is_anchored(BATCH)
    assert not client.anchor(BATCH, ROOT, "", 1, signer=SIGNER).already_anchored
