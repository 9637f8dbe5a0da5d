"""AnchorClient: anchors audit-batch roots through the AuditAnchor contract (blocking web3)."""

from __future__ import annotations

import time
from collections.abc import Callable

from eth_account import Account
from web3 import HTTPProvider, Web3
from web3.contract import Contract
from web3.exceptions import BlockNotFound

from services.ledger.anchors import ZERO, AnchorReceipt, Stored, batch_key, hex32
from services.ledger.deployment import resolve_contract
from services.ledger.errors import AnchorConflict, AnchorRejected
from services.ledger.retry import Backoff, call_with_retry
from services.ledger.settings import LedgerServiceSettings
from services.ledger.transactions import REVERTS, Sender
from shared.errors import ConfigError, InvalidInput
from shared.settings import LedgerSettings

ALREADY_ANCHORED = "AuditAnchor: already anchored"  # the contract's revert reason


class AnchorClient:
    """Blocking and thread-safe; async callers run it with asyncio.to_thread."""

    def __init__(self, w3: Web3, contract: Contract, chain_id: int, sender: Sender,
                 backoff: Backoff, sleep: Callable[[float], None] = time.sleep) -> None:
        self.w3, self.contract, self.chain_id, self.sender = w3, contract, chain_id, sender
        self.backoff, self._sleep = backoff, sleep

    @classmethod
    def connect(cls, ledger: LedgerSettings, service: LedgerServiceSettings,
                w3: Web3 | None = None, sleep: Callable[[float], None] = time.sleep,
                ) -> AnchorClient:
        """Reach the node (retrying while it is down), check it, find or deploy the contract."""
        # web3's own retries would hide outages from our backoff and its deadline.
        w3 = w3 or Web3(HTTPProvider(ledger.rpc_url, exception_retry_configuration=None,
                                     request_kwargs={"timeout": service.rpc_timeout_s}))
        account = Account.from_key(ledger.private_key.get_secret_value())
        sender = Sender(w3, account, ledger.confirmations, service.receipt_timeout_s,
                        service.poll_interval_s, sleep)
        backoff = Backoff.from_settings(service)

        def setup() -> tuple[Contract, int]:
            chain_id = w3.eth.chain_id
            if ledger.chain_id is not None and chain_id != ledger.chain_id:
                raise ConfigError(f"STREAMRAG_LEDGER_CHAIN_ID is {ledger.chain_id} but "
                                  f"{ledger.rpc_url} serves chain {chain_id}")
            contract = resolve_contract(w3, sender, ledger, service.data_dir)
            owner = contract.functions.OWNER().call()
            if owner != account.address:
                raise ConfigError(f"STREAMRAG_LEDGER_PRIVATE_KEY is account {account.address}, "
                                  f"but AuditAnchor {contract.address} is owned by {owner}")
            return contract, chain_id

        contract, chain_id = call_with_retry(setup, backoff, "connect", sleep)
        return cls(w3, contract, chain_id, sender, backoff, sleep)

    def is_anchored(self, batch_id: str) -> bool:
        """Whether the contract holds an anchor for `batch_id` (confirmed or not)."""
        return self.anchored_block(batch_id) != 0

    def anchored_block(self, batch_id: str) -> int:
        """The block the contract says anchored `batch_id`; 0: not anchored."""
        _, block = call_with_retry(lambda: self._stored(batch_key(batch_id)), self.backoff,
                                   "is_anchored", self._sleep)
        return block

    def head(self) -> tuple[int, str]:
        """The node's newest block: number and hash."""
        block = call_with_retry(lambda: self.w3.eth.get_block("latest"), self.backoff,
                                "head", self._sleep)
        return int(block["number"]), bytes(block["hash"]).hex()

    def block_hash(self, number: int) -> str | None:
        """The hash of the node's block at `number`; None when it has no such block."""
        def get() -> str | None:
            try:
                return bytes(self.w3.eth.get_block(number)["hash"]).hex()
            except BlockNotFound:
                return None
        return call_with_retry(get, self.backoff, "block_hash", self._sleep)

    def anchor(self, batch_id: str, root_hex: str, prev_root_hex: str,
               leaf_count: int, *, signer: str) -> AnchorReceipt:
        """Anchor once; a replay of an anchored batch returns the first anchor, unchanged.

        `signer`: the address whose signature on the audit record was checked. A replay
        whose root, prev_root, leaf count or signer differs from the stored anchor raises
        AnchorConflict naming the fields.
        """
        root, prev = hex32(root_hex, "root"), hex32(prev_root_hex, "prev_root")
        if root == ZERO:
            raise InvalidInput("empty_root", "root", "a batch needs a Merkle root")
        if leaf_count < 0:
            raise InvalidInput("negative_leaf_count", "leaf_count")
        if not Web3.is_address(signer) or int(signer, 16) == 0:
            raise InvalidInput("bad_signer_address", "signer")
        want = Stored(root, prev, leaf_count, Web3.to_checksum_address(signer))
        return call_with_retry(lambda: self._anchor_once(batch_id, want),
                               self.backoff, f"anchor {batch_id}", self._sleep)

    def _anchor_once(self, batch_id: str, want: Stored) -> AnchorReceipt:
        key = batch_key(batch_id)
        if (known := self._read_back(batch_id, key, want)) is not None:
            return known
        try:
            receipt = self.sender.send(self.contract.functions.anchor(
                key, want.root, want.prev_root, want.leaf_count, want.signer))
        except REVERTS as exc:
            # Lost a race with a replayed tx or a second worker: the anchor exists.
            if ALREADY_ANCHORED in str(exc) and (known := self._read_back(batch_id, key, want)):
                return known
            raise AnchorRejected(f"anchor {batch_id} refused: {exc}") from exc
        if receipt["status"] != 1:
            if (known := self._read_back(batch_id, key, want)) is not None:
                return known
            raise AnchorRejected(f"anchor {batch_id}: tx {receipt['transactionHash'].to_0x_hex()}"
                                 " reverted")
        return AnchorReceipt(batch_id, want.root.hex(), want.prev_root.hex(), want.leaf_count,
                             receipt["transactionHash"].to_0x_hex(), receipt["blockNumber"],
                             self.contract.address, self.chain_id, time.time(),
                             signer=want.signer)

    def _stored(self, key: bytes) -> tuple[Stored, int]:
        root, prev, count, block, signer = self.contract.functions.anchors(key).call()
        return Stored(root, prev, count, signer), block

    def _read_back(self, batch_id: str, key: bytes, want: Stored) -> AnchorReceipt | None:
        """The stored anchor with the tx that wrote it (found by its event), or None."""
        stored, block = self._stored(key)
        if block == 0:
            return None
        if differ := stored.differences(want):
            raise AnchorConflict(batch_id, differ)
        (event,) = self.contract.events.Anchored.get_logs(
            argument_filters={"batch_id": key}, from_block=block, to_block=block)
        receipt = self.sender.confirmed(event["transactionHash"])
        timestamp = self.w3.eth.get_block(block)["timestamp"]
        return AnchorReceipt(batch_id, stored.root.hex(), stored.prev_root.hex(),
                             stored.leaf_count, receipt["transactionHash"].to_0x_hex(), block,
                             self.contract.address, self.chain_id, float(timestamp),
                             already_anchored=True, signer=stored.signer)
