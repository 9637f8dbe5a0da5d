"""Sign transactions locally, send them with our own nonce, and wait until they are confirmed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_typing import ChecksumAddress
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import ContractLogicError, TransactionNotFound
from web3.types import TxReceipt

from services.ledger.errors import LedgerUnavailable

# How a node says "this call reverts". web3's in-process EthereumTesterProvider raises
# eth-tester's own TransactionFailed instead of ContractLogicError (eth-tester: dev only).
REVERTS: tuple[type[Exception], ...] = (ContractLogicError,)
try:
    from eth_tester.exceptions import TransactionFailed
except ImportError:  # pragma: no cover - production installs have no eth-tester
    pass
else:
    REVERTS += (TransactionFailed,)


class Sender:
    """One account's transactions; the lock keeps nonces unique across worker threads."""

    def __init__(
        self, w3: Web3, account: LocalAccount, confirmations: int, timeout_s: float,
        poll_s: float, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.w3, self.account, self.confirmations = w3, account, confirmations
        self.timeout_s, self.poll_s, self._sleep = timeout_s, poll_s, sleep
        self._lock = threading.Lock()

    @property
    def address(self) -> ChecksumAddress:
        return self.account.address

    def send(self, call: Any) -> TxReceipt:
        """Build `call` (a contract function or constructor), sign, send, wait for confirmation.

        build_transaction estimates gas, so a call that would revert raises
        one of REVERTS here, before anything is sent or paid for.
        """
        with self._lock:
            # "pending" counts our own unmined transactions, so a resend never reuses one.
            nonce = self.w3.eth.get_transaction_count(self.address, "pending")
            tx = call.build_transaction({"from": self.address, "nonce": nonce})
            signed = self.account.sign_transaction(tx)
            tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        return self.confirmed(tx_hash)

    def confirmed(self, tx_hash: HexBytes | str) -> TxReceipt:
        """The receipt once its block has `confirmations` blocks on top.

        The receipt is read after the head on every round, so a reorg that drops or
        moves the transaction while we wait is seen, and we wait on the new block.
        """
        waited = 0.0  # counted in polls, not wall time, so a busy machine cannot cut it short
        while True:
            head = self.w3.eth.block_number
            receipt = self._receipt(tx_hash)
            if receipt is not None and head >= receipt["blockNumber"] + self.confirmations:
                return receipt
            if waited >= self.timeout_s:
                state = "unmined" if receipt is None else "unconfirmed"
                msg = f"tx {HexBytes(tx_hash).to_0x_hex()} still {state} after {self.timeout_s:g}s"
                raise LedgerUnavailable(msg)
            self._sleep(self.poll_s)
            waited += self.poll_s

    def _receipt(self, tx_hash: HexBytes | str) -> TxReceipt | None:
        try:
            return self.w3.eth.get_transaction_receipt(HexBytes(tx_hash))
        except TransactionNotFound:
            return None
