"""The size contract: every input the mesh accepts derives records within the record limit,
and a record over it is refused with `derived_too_large` before any producer sees it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.contract import sizes
from shared.contract.topics import all_topic_specs
from shared.errors import InvalidInput
from shared.settings import KafkaSettings

ROOT = Path(__file__).resolve().parents[3]
# From a byte to the input limit and one past it, densest near both ends.
SWEEP = sorted({0, 1, 2, 100, 1024, 65_536, 300_000, 450_000, 1_000_500,
                sizes.MAX_INPUT_BYTES - 1, sizes.MAX_INPUT_BYTES, sizes.MAX_INPUT_BYTES + 1})
KEY = b"k" * (sizes.MAX_ID_CHARS + 64)  # the longest key: another model's id, NUL, doc id


@pytest.mark.parametrize("input_bytes", SWEEP)
def test_every_record_derived_from_an_accepted_input_fits(input_bytes: int) -> None:
    planned = sizes.largest(input_bytes)
    limit = sizes.value_limit(KEY)
    over = {kind: size for kind, size in planned.items() if size > limit}
    # Accepted inputs (up to the limit) fit whatever their shape; one byte past the input
    # limit is ingest's to refuse.
    if input_bytes <= sizes.MAX_INPUT_BYTES:
        assert over == {}
    assert planned["EmbeddedChunkSet"] >= planned["ChunkSet"] >= input_bytes


@given(st.integers(0, sizes.MAX_INPUT_BYTES), st.integers(0, sizes.MAX_INPUT_BYTES))
def test_a_larger_input_never_plans_smaller_records(a: int, b: int) -> None:
    small, large = sorted((a, b))
    assert all(sizes.largest(small)[k] <= v for k, v in sizes.largest(large).items())


@given(st.integers(1, sizes.MAX_INPUT_BYTES), st.integers(1, 126))
def test_overlap_can_outgrow_the_limit_and_then_the_stage_refuses(text_bytes: int,
                                                                   overlap: int) -> None:
    """A chunk overlap repeats text: the plan grows with it, and whatever is over the limit
    is refused by `check` (derived_too_large) rather than sent."""
    shape = sizes.Shape(overlap_tokens=overlap, long_title=True)
    planned = sizes.embedded_set_bytes(text_bytes, shape)
    assert planned >= sizes.embedded_set_bytes(text_bytes, sizes.WORST)
    value = b"x" * min(planned, sizes.MAX_RECORD_BYTES)
    if sizes.fits(value, KEY):
        sizes.check(value, KEY, "embedded chunk set")
    else:
        with pytest.raises(InvalidInput) as caught:
            sizes.check(value, KEY, "embedded chunk set")
        assert caught.value.reason == "derived_too_large"


@pytest.mark.parametrize("record_limit", [sizes.MIN_RECORD_BYTES, sizes.MAX_RECORD_BYTES])
def test_check_refuses_exactly_past_the_limit_with_the_key_counted(record_limit: int) -> None:
    limit = record_limit - sizes.FRAMING_BYTES - len(KEY)
    sizes.check(b"v" * limit, KEY, "chunk set", record_limit)
    with pytest.raises(InvalidInput) as caught:
        sizes.check(b"v" * (limit + 1), KEY, "chunk set", record_limit)
    assert caught.value.reason == sizes.DERIVED_TOO_LARGE
    assert str(limit + 1) in caught.value.detail


def test_every_topic_and_the_compose_broker_take_the_contracts_record_limit() -> None:
    assert {s.broker_config()["max.message.bytes"] for s in all_topic_specs()} == {
        str(sizes.MAX_RECORD_BYTES)}
    compose = (ROOT / "docker-compose.yml").read_text()
    for name in ("KAFKA_MESSAGE_MAX_BYTES", "KAFKA_REPLICA_FETCH_MAX_BYTES"):
        found = re.search(rf'^\s+{name}: "(\d+)"', compose, re.MULTILINE)
        assert found and int(found.group(1)) == sizes.MAX_RECORD_BYTES, name


def test_the_producer_limit_can_be_lowered_never_raised_past_the_topics() -> None:
    assert KafkaSettings().max_record_bytes == sizes.MAX_RECORD_BYTES
    assert KafkaSettings(max_record_bytes=sizes.MIN_RECORD_BYTES).max_record_bytes == \
        sizes.MIN_RECORD_BYTES
    with pytest.raises(ValidationError):
        KafkaSettings(max_record_bytes=sizes.MAX_RECORD_BYTES + 1)
