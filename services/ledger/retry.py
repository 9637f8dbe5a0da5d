"""Exponential backoff for calls to an Ethereum node that may be down or restarting."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import requests
from web3.exceptions import ProviderConnectionError

from services.ledger.errors import LedgerUnavailable
from services.ledger.settings import LedgerServiceSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

# Only "could not talk to the node": reverts, bad arguments and RPC errors are not retried.
UNREACHABLE: tuple[type[BaseException], ...] = (
    requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError,
    ProviderConnectionError,
)


@dataclass(frozen=True)
class Backoff:
    initial_s: float
    max_s: float
    deadline_s: float

    @classmethod
    def from_settings(cls, settings: LedgerServiceSettings) -> Backoff:
        return cls(settings.retry_initial_s, settings.retry_max_s, settings.retry_deadline_s)

    def delays(self) -> Iterator[float]:
        delay = self.initial_s
        while True:
            yield delay
            delay = min(delay * 2, self.max_s)


def call_with_retry(
    fn: Callable[[], T], backoff: Backoff, what: str,
    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
) -> T:
    """`fn()`, retried while the node is unreachable; LedgerUnavailable past the deadline.

    Only safe for idempotent work: every caller here either reads or anchors, and the
    contract refuses a second anchor of the same batch.
    """
    deadline = clock() + backoff.deadline_s
    for delay in backoff.delays():
        try:
            return fn()
        except UNREACHABLE as exc:
            left = deadline - clock()
            if left <= 0:
                msg = f"{what}: node unreachable for {backoff.deadline_s:g}s ({exc})"
                raise LedgerUnavailable(msg) from exc
            log.warning("%s: node unreachable, retrying in %.2fs: %s", what, min(delay, left), exc)
            sleep(min(delay, left))
    raise AssertionError("unreachable: delays() never ends")  # pragma: no cover
