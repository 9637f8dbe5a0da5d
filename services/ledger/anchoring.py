"""Anchoring, shared by the ledger's two agents (document batches in agents.py, query
audits in queries.py): the worker's one node connection, a root anchored on chain waiting
out a node that is down, the anchor announced on ledger.anchors.v1, the record boundary
that dead-letters bad input, and the stop of the whole worker when anchoring fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn, TypeVar

import faust

from services.ledger.anchors import AnchorReceipt
from services.ledger.app import Topics
from services.ledger.chain import AnchorClient
from services.ledger.errors import LedgerUnavailable
from services.ledger.settings import LedgerServiceSettings
from shared.contract.codec import encode
from shared.contract.records import Anchor
from shared.settings import LedgerSettings
from shared.worker.boundary import Boundary

log = logging.getLogger(__name__)
T = TypeVar("T")


def _stopping_already(exc: BaseException) -> None:
    """The ledger stops itself through `fatal` (app.crash), as its tests expect."""


async def _until_available(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking `fn` in a thread until the node answers.

    The client already backs off up to its deadline; past it we keep waiting rather than
    move on, because a skipped batch would be a hole in the audit trail, and anchoring
    again is harmless.
    """
    while True:
        try:
            return await asyncio.to_thread(fn, *args)
        except LedgerUnavailable as exc:
            log.error("ledger node unavailable, still retrying: %s", exc)


class Anchoring:
    """One ledger stage's node connection, anchors and announcements, and its boundary."""

    def __init__(self, app: faust.App, settings: LedgerServiceSettings, ledger: LedgerSettings,
                 topics: Topics) -> None:
        self.app, self.settings, self.ledger = app, settings, ledger
        self.anchors_topic, self.dlq = topics.anchors, topics.dlq
        # Anchoring failures stop the worker (fatal); the boundary handles the rest.
        self.boundary = Boundary("ledger", topics.dlq, on_fatal=_stopping_already)
        self.client: AnchorClient | None = None
        self._connecting = asyncio.Lock()  # one connect (and at most one deploy)

    def connected(self) -> AnchorClient | None:
        """The node connection, once a caller has made it."""
        return self.client

    async def ledger_client(self) -> AnchorClient:
        """The stage's one node connection; the first caller connects (and deploys if need
        be)."""
        async with self._connecting:
            if self.client is None:
                self.client = await _until_available(AnchorClient.connect, self.ledger,
                                                     self.settings)
        return self.client

    async def anchor_root(self, batch_id: str, root: str, prev_root: str, leaf_count: int,
                          signer: str) -> AnchorReceipt:
        """Anchor one batch's root (documents' or queries'), waiting out a node that is
        down."""
        client = await self.ledger_client()
        return await _until_available(partial(client.anchor, signer=signer),
                                      batch_id, root, prev_root, leaf_count)

    async def announce(self, receipt: AnchorReceipt, batch_closed_at: float) -> Anchor:
        """The anchor on ledger.anchors.v1, acknowledged by the broker when this returns.

        The caller marks the batch done in the table only after: a kill between the two
        replays the batch, anchored again ("already on chain") and announced again. The
        other order lost announcements under kill -9: the table's changelog record went
        out at once, the announcement only with the offset commit, seconds later.
        """
        record = receipt.record(batch_closed_at=batch_closed_at)
        await (await self.anchors_topic.send(key=receipt.batch_id.encode(),
                                             value=encode(record), force=True))
        return record

    async def fatal(self, exc: Exception, context: str) -> NoReturn:
        """Stop the whole worker: an agent crash would be restarted past the batch, acking
        it."""
        log.critical("ledger cannot go on (%s), stopping the worker: %s", context, exc)
        await self.app.crash(exc)
        raise exc
