"""W3C trace context in Kafka headers: parsed as the spec says, carried onward unchanged."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.tracing import context
from shared.tracing.context import TraceParent, parse, with_trace

TID, SID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def test_a_valid_header_is_read_whatever_its_form() -> None:
    for raw in (f"00-{TID}-{SID}-01", f"00-{TID}-{SID}-01".encode(), f" 00-{TID}-{SID}-01 "):
        assert parse(raw) == TraceParent(TID, SID, True)
    assert parse(f"00-{TID}-{SID}-00") == TraceParent(TID, SID, False)
    assert parse(f"00-{TID}-{SID}-03") == TraceParent(TID, SID, True)  # other flag bits
    # A later version may carry more fields; version 00 may not.
    assert parse(f"01-{TID}-{SID}-01-extra") == TraceParent(TID, SID, True)
    assert parse(f"00-{TID}-{SID}-01-extra") is None


def test_what_the_spec_forbids_starts_a_new_trace() -> None:
    bad = [f"ff-{TID}-{SID}-01", f"00-{'0' * 32}-{SID}-01", f"00-{TID}-{'0' * 16}-01",
           f"00-{TID.upper()}-{SID}-01", f"00-{TID[:-1]}-{SID}-01", f"00-{TID}-{SID}",
           "", "garbage", None, b"\xff\xfe"]
    assert [parse(b) for b in bad] == [None] * len(bad)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=80), st.text(max_size=80)))
def test_any_header_value_parses_or_is_refused_never_raises(raw: bytes | str) -> None:
    got = parse(raw)
    if got is not None:
        assert parse(got.header) == got


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=16, max_size=16), st.binary(min_size=8, max_size=8), st.booleans())
def test_made_headers_read_back(trace: bytes, span: bytes, sampled: bool) -> None:
    parent = TraceParent(trace.hex(), span.hex(), sampled)
    expected = parent if trace.strip(b"\0") and span.strip(b"\0") else None
    assert parse(parent.header) == expected


def test_headers_are_found_in_either_form_and_first_wins() -> None:
    tp = f"00-{TID}-{SID}-01".encode()
    other = f"00-{os.urandom(16).hex()}-{SID}-01".encode()
    for headers in ([("TraceParent", tp), ("traceparent", other), ("tracestate", b"k=v")],
                    {"traceparent": tp, "tracestate": b"k=v"}):
        parent, state = context.from_headers(headers)
        assert parent == TraceParent(TID, SID, True) and state == b"k=v"
    assert context.from_headers(None) == (None, None)
    # A tracestate without a valid parent is dropped with it, and an oversized one alone.
    assert context.from_headers([("tracestate", b"k=v")]) == (None, None)
    assert context.from_headers([("traceparent", tp), ("tracestate", b"x" * 600)])[1] is None


def test_outputs_carry_the_record_in_hands_context_unless_the_caller_set_one() -> None:
    pair = (f"00-{TID}-{SID}-01".encode(), b"k=v")
    assert with_trace([("a", b"1")]) == [("a", b"1")]  # nothing in hand: untouched
    with context.carrying(pair):
        assert with_trace([("a", b"1")]) == [("a", b"1"), ("traceparent", pair[0]),
                                             ("tracestate", b"k=v")]
        assert with_trace({}) == {"traceparent": pair[0], "tracestate": b"k=v"}
        own = [("traceparent", b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01")]
        assert with_trace(list(own)) == own
        assert with_trace(None) == [("traceparent", pair[0]), ("tracestate", b"k=v")]
    assert context.outgoing.get() is None


def test_a_record_without_context_gets_a_new_unsampled_trace_and_keeps_its_own_otherwise(
        ) -> None:
    first, second = context.continued([]), context.continued(None)
    a, b = parse(first[0]), parse(second[0])
    assert a is not None and b is not None and a.trace_id != b.trace_id
    assert not a.sampled and first[1] is None
    assert parse(context.continued([], sampled_if_new=True)[0]).sampled  # type: ignore[union-attr]
    own = f"00-{TID}-{SID}-01".encode()
    assert context.continued([("traceparent", own), ("tracestate", b"k=v")]) == (own, b"k=v")


def test_a_record_at_the_size_limit_still_fits_with_the_largest_trace_context() -> None:
    """Every record carries the trace headers: a value the size check lets through must
    still pass the producer's own estimate (headers included) with the largest ones."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from shared.contract import sizes

    key = b"k" * (sizes.MAX_ID_CHARS + 64)
    pair = (f"00-{TID}-{SID}-01".encode(), b"v" * sizes.MAX_TRACESTATE)
    assert context.from_headers([("traceparent", pair[0]), ("tracestate", pair[1])])[1] \
        == pair[1]  # carried onward at the limit
    for limit in (sizes.MIN_RECORD_BYTES, sizes.MAX_RECORD_BYTES):
        value = b"x" * sizes.value_limit(key, limit)
        headers = with_trace([("streamrag-kind", b"truncate")], pair)
        estimate = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        assert estimate <= limit, (limit, estimate)
