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
# What build() wired this module to: one per process.
app: faust.App
audit_queries_topic: Any


def build(on: faust.App, topic: Any) -> None:
    """Register the timer that sends the recorded audits to `topic` on `on`."""
    global app, audit_queries_topic
    app, audit_queries_topic = on, topic
    app.timer(recorder().settings.audit_flush_s)(send_query_audits)


def signed(audits: list[QueryAudit]) -> list[QueryAudit]:
    key = recorder().settings.audit_signing_key
    return [sign(a, key) for a in audits]


_sending = asyncio.Lock()  # one batch at a time: the stop's flush waits for the timer's


async def send_recorded() -> int:
    """Sign and hand to the producer every audit recorded so far; how many."""
    async with _sending:
        audits = recorder().drain()
        if not audits:
            return 0
        for audit in await asyncio.to_thread(signed, audits):
            await audit_queries_topic.send(key=audit.query_id.encode(), value=encode(audit))
        return len(audits)


async def send_query_audits() -> None:
    if sent := await send_recorded():
        log.debug("sent %d query audits", sent)


async def flush_on_stop() -> None:
    """The last calls' audits, sent and acknowledged: the server has stopped answering, so
    nothing is recorded after this, and the timer may not tick again before the producer
    stops."""
    sent = await send_recorded()
    await app.producer.flush()
    log.info("query audits flushed on stop (%d sent now)", sent)
