"""W3C trace context (https://www.w3.org/TR/trace-context/) as Kafka headers, no SDK needed.

Every record the mesh writes carries a `traceparent` header (and the `tracestate` that came
with it): the one of the span that handled its input when tracing is on, else its input's
own, unchanged; a record that arrived with none gets a new trace at the first stage that
sees it (not sampled when tracing is off, so no stage records spans for it downstream).

`outgoing` holds the header pair the sends of the record in hand carry; the send seam
(shared.kafka.patches, Faust's `Channel.prepare_headers`) adds it to every record a stage
writes inside that record's block, and `with_trace` to the headers of a plain aiokafka send.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from shared.contract.sizes import MAX_TRACESTATE  # record sizes leave room for it

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
# version-traceid-parentid-flags; a later version may append fields after a dash.
_PARENT = re.compile(rb"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


@dataclass(frozen=True, slots=True)
class TraceParent:
    trace_id: str  # 32 lowercase hex digits, not all zero
    span_id: str  # 16 lowercase hex digits, not all zero
    sampled: bool

    @property
    def header(self) -> bytes:
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}".encode()


def parse(value: bytes | str | None) -> TraceParent | None:
    """The trace parent a header names; None for a missing or malformed one (the W3C rule:
    a receiver that cannot parse it starts a new trace)."""
    if value is None:
        return None
    raw = value.encode("latin-1", "replace") if isinstance(value, str) else bytes(value)
    m = _PARENT.match(raw.strip())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == b"ff" or (version == b"00" and rest):
        return None
    if trace_id == b"0" * 32 or span_id == b"0" * 16:
        return None
    return TraceParent(trace_id.decode(), span_id.decode(), bool(int(flags, 16) & 1))


def new(sampled: bool) -> TraceParent:
    """A new trace's root parent (random ids, as W3C asks)."""
    return TraceParent(os.urandom(16).hex(), os.urandom(8).hex(), sampled)


def header_pairs(headers: Any) -> list[tuple[str, bytes]]:
    """A record's headers as (name, value) pairs, whatever form the client gives."""
    if not headers:
        return []
    if isinstance(headers, dict):
        return list(headers.items())
    return [(k, v) for k, v in headers]


def from_headers(headers: Any) -> tuple[TraceParent | None, bytes | None]:
    """The record's trace parent and tracestate (the first of each name)."""
    parent: TraceParent | None = None
    state: bytes | None = None
    seen: set[str] = set()
    for name, value in header_pairs(headers):
        key = name.lower()
        if key in seen:
            continue
        seen.add(key)
        if key == TRACEPARENT:
            parent = parse(value)
        elif key == TRACESTATE and value is not None and len(value) <= MAX_TRACESTATE:
            state = bytes(value)
    return parent, (state if parent is not None else None)


Outgoing = tuple[bytes, bytes | None]  # (traceparent, tracestate) to put on sends
outgoing: ContextVar[Outgoing | None] = ContextVar("streamrag_trace_outgoing", default=None)


@contextmanager
def carrying(pair: Outgoing | None) -> Any:
    """Sends made inside carry `pair` (a batching stage re-enters a record's context)."""
    token = outgoing.set(pair)
    try:
        yield
    finally:
        outgoing.reset(token)


def with_trace(headers: Any, pair: Outgoing | None = None) -> Any:
    """`headers` with the trace context added unless they hold one already (a dict or a
    list, returned in the same form); `pair` defaults to the record in hand's."""
    pair = pair if pair is not None else outgoing.get()
    if pair is None:
        return headers
    if isinstance(headers, dict):
        if not any(k.lower() == TRACEPARENT for k in headers):
            headers[TRACEPARENT] = pair[0]
            if pair[1] is not None:
                headers[TRACESTATE] = pair[1]
        return headers
    out = list(headers or [])
    if not any(k.lower() == TRACEPARENT for k, _ in out):
        out.append((TRACEPARENT, pair[0]))
        if pair[1] is not None:
            out.append((TRACESTATE, pair[1]))
    return out


def continued(headers: Iterable[tuple[str, bytes]] | dict[str, bytes] | None,
              sampled_if_new: bool = False) -> Outgoing:
    """What a record's outputs carry when no span is made for it: its own context, or a new
    trace's (not sampled unless asked) when it came without one."""
    parent, state = from_headers(headers)
    if parent is None:
        return new(sampled_if_new).header, None
    return parent.header, state
