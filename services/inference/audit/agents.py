"""Send the answered calls' audits: signed, one record each, to audit.queries.v1.

Imported by services/inference/agents.py so the timer runs in the inference worker (and in
one-process mode). Signing runs in a thread: it is the costly part (about 0.3-0.6 ms each).
A send the broker refuses stops nothing and loses nothing: the record stays unacknowledged
in the producer, which retries it; a worker killed before the send loses the audits of
the last flush interval (at most audit_flush_s of answered calls).
"""

from __future__ import annotations

import asyncio
import logging

from services.inference.app import app, audit_queries_topic
from services.inference.audit.recorder import recorder
from shared.contract.audit_signing import sign
from shared.contract.codec import encode
from shared.contract.records import QueryAudit

log = logging.getLogger(__name__)


def signed(audits: list[QueryAudit]) -> list[QueryAudit]:
    key = recorder.settings.audit_signing_key
    return [sign(a, key) for a in audits]


@app.timer(recorder.settings.audit_flush_s)
async def send_query_audits() -> None:
    audits = recorder.drain()
    if not audits:
        return
    for audit in await asyncio.to_thread(signed, audits):
        await audit_queries_topic.send(key=audit.query_id.encode(), value=encode(audit))
    log.debug("sent %d query audits", len(audits))
