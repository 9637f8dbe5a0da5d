"""Send the answered calls' audits: signed, one record each, to audit.queries.v1.

Registered by services/inference/agents.py's build, so the timer runs in the inference
worker (and in one-process mode). Signing runs in a thread: it is the costly part (about
0.3-0.6 ms each).
A send the broker refuses stops nothing and loses nothing: the record stays unacknowledged
in the producer, which retries it. A worker stopped gracefully sends the audits of the calls
its grace period finished, and waits for the broker to take them (`flush_on_stop`, run by
the runtime after the gRPC server's last answer); one killed (-9) loses the audits of the
last flush interval (at most audit_flush_s of answered calls).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from services.inference.audit.recorder import recorder
from shared.contract.audit_signing import sign
from shared.contract.codec import encode
from shared.contract.records import QueryAudit

log = logging.getLogger(__name__)


def signed(audits: list[QueryAudit]) -> list[QueryAudit]:
    key = recorder().settings.audit_signing_key
    return [sign(a, key) for a in audits]


class QueryAudits:
    """The sender of one inference stage's recorded audits to audit.queries.v1."""

    def __init__(self, app: faust.App, topic: Any) -> None:
        self.app, self.topic = app, topic
        self._sending = asyncio.Lock()  # one batch at a time: the stop's flush waits

    def register(self) -> QueryAudits:
        """Register the timer that sends the recorded audits."""
        self.app.timer(recorder().settings.audit_flush_s)(self.send_query_audits)
        return self

    async def send_recorded(self) -> int:
        """Sign and hand to the producer every audit recorded so far; how many."""
        async with self._sending:
            audits = recorder().drain()
            if not audits:
                return 0
            for audit in await asyncio.to_thread(signed, audits):
                await self.topic.send(key=audit.query_id.encode(), value=encode(audit))
            return len(audits)

    async def send_query_audits(self) -> None:
        if sent := await self.send_recorded():
            log.debug("sent %d query audits", sent)

    async def flush_on_stop(self) -> None:
        """The last calls' audits, sent and acknowledged: the server has stopped answering,
        so nothing is recorded after this, and the timer may not tick again before the
        producer stops."""
        sent = await self.send_recorded()
        await self.app.producer.flush()
        log.info("query audits flushed on stop (%d sent now)", sent)
