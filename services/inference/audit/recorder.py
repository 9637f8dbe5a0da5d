"""The handlers' side of the query audit: record an answered call in memory, nothing more.

The gRPC handlers call `answered`, `streamed` or `retrieved` with the replies they sent
(protobuf), once the call has answered; a call that fails before answering records none. A
stream cut off after its citations were sent is recorded as unfinished (`finished` False).
The record is built here (two hashes, no I/O); signing and sending happen in the agent
(services/inference/audit/agents.py), so the answer path waits on neither. The buffer is
bounded: a stalled broker costs the oldest unsent audits (counted and logged), never memory
or answer latency.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import Counter
from pydantic import SecretStr

from services.inference.api.principal import current
from services.inference.audit.record import query_audit
from services.inference.audit.settings import QueryAuditSettings
from shared.contract.access import Access
from shared.contract.query_audit import AuditPrincipalSettings
from shared.contract.records import QueryAudit

log = logging.getLogger(__name__)
DROPPED = Counter("streamrag_inference_query_audits_dropped",
                  "Query audits dropped unsent because the buffer was full (broker stalled)")


def _caller() -> tuple[str, str, Access]:
    """The call's principal, as the authenticator bound it (services/inference/api/auth.py)."""
    p = current()
    return p.subject, p.kind, p.access


class AuditRecorder:
    def __init__(self, settings: QueryAuditSettings, now: Callable[[], float] = time.time,
                 caller: Callable[[], tuple[str, str, Access]] = _caller,
                 principal_key: SecretStr | None = None) -> None:
        self.settings, self.now, self.caller = settings, now, caller
        self.principal_key = principal_key or AuditPrincipalSettings().principal_key
        self.items: deque[QueryAudit] = deque(maxlen=settings.audit_buffer_max)

    def record(self, method: str, question: str, citations: Iterable[Any],
               cited: Iterable[str], answer_mode: str, variant: str = "",
               config_version: int = 0, finished: bool = True) -> QueryAudit:
        subject, kind, access = self.caller()
        audit = query_audit(
            query_id=uuid.uuid4().hex, method=method, question=question, subject=subject,
            kind=kind, access=access, key=self.principal_key, at=self.now(),
            shown=((c.chunk_id, c.doc_id, c.version) for c in citations), cited=cited,
            answer_mode=answer_mode, variant=variant, config_version=config_version,
            finished=finished)
        if len(self.items) == self.items.maxlen:
            DROPPED.inc()
            log.error("query audit buffer full (%d): the oldest unsent audit is dropped",
                      self.items.maxlen)
        self.items.append(audit)
        return audit

    def answered(self, method: str, question: str, reply: Any) -> QueryAudit:
        """A Query's reply (pb.QueryResponse)."""
        return self.record(method, question, reply.citations, reply.cited_chunk_ids,
                           reply.answer_mode, reply.variant, reply.config_version)

    def streamed(self, question: str, start: Any, end: Any | None) -> QueryAudit:
        """A StreamQuery's first and last messages (StreamStart and StreamEnd inside); `end`
        None: the stream was cut off or failed after its citations were sent."""
        s = start.start
        cited = () if end is None else end.end.cited_chunk_ids
        return self.record("StreamQuery", question, s.citations, cited, s.answer_mode,
                           s.variant, s.config_version, finished=end is not None)

    def retrieved(self, question: str, reply: Any) -> QueryAudit:
        """A Retrieve's reply: the chunks were shown, nothing was answered or cited."""
        return self.record("Retrieve", question, reply.chunks, (), "", reply.variant,
                           reply.config_version)

    def drain(self) -> list[QueryAudit]:
        out = list(self.items)
        self.items.clear()
        return out


@functools.cache
def recorder() -> AuditRecorder:
    """The one recorder of this process (its settings read on first use, never at import):
    the handlers record into it, the agent drains it."""
    return AuditRecorder(QueryAuditSettings())
