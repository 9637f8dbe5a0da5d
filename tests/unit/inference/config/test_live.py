"""LiveConfig: valid newer versions applied in order; bad and stale records never applied."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.config.live import LiveConfig, Refusal
from services.inference.settings import InferenceSettings
from shared.contract.query_config import BASE, Knobs

SETTINGS = InferenceSettings(default_top_k=5, max_top_k=50)


def record(version: int, knobs: dict[str, Any] | None = None,
           variants: dict[str, Any] | None = None, **extra: Any) -> bytes:
    data = {"version": version, "author": "ann", "at": 1.0, "knobs": knobs or {},
            "variants": variants or {}, **extra}
    return json.dumps(data).encode()


class Seen:
    def __init__(self) -> None:
        self.applied: list[int] = []
        self.refused: list[Refusal] = []

    def live(self) -> LiveConfig:
        return LiveConfig(SETTINGS, self.applied.append, self.refused.append)


def test_versions_apply_in_order_and_reach_the_settings() -> None:
    seen = Seen()
    live = seen.live()
    assert live.serve("me", "q").version == 0
    assert live.serve("me", "q").settings.default_top_k == 5
    assert live.offer(record(1, {"default_top_k": 3, "hybrid": False})) is None
    assert live.offer(record(2, {"default_top_k": 7})) is None
    served = live.serve("me", "q")
    assert (served.version, served.variant, served.settings.default_top_k) == (2, BASE, 7)
    assert served.settings.hybrid is True  # version 2 does not set it: the settings' value
    assert seen.applied == [1, 2] and not seen.refused


def test_stale_and_bad_records_are_refused_and_the_applied_version_stays() -> None:
    seen = Seen()
    live = seen.live()
    live.offer(record(4, {"default_top_k": 9}))
    bad = [record(4, {"default_top_k": 2}),  # not above 4
           record(3, {"default_top_k": 2}),  # stale
           record(5, {"default_top_k": 0}),  # out of range
           record(5, {"default_top_k": 51}),  # above this instance's max_top_k
           record(5, {"top_k": 2}),  # unknown knob
           record(5, {"hybrid": "yes"}),  # wrong type
           record(5, {"default_top_k": 2.0}),  # wrong type, not coerced
           record(5, variants={"a": {"weight": 0}}),  # weights add up to 0
           b"{not json", None]
    reasons = [live.offer(raw) for raw in bad]
    assert all(r is not None for r in reasons)
    assert [r.reason for r in seen.refused][:2] == ["stale_version", "stale_version"]
    assert seen.refused[4].field == "knobs.top_k"
    assert live.version == 4 and live.serve("x", "y").settings.default_top_k == 9
    assert seen.applied == [4]
    assert live.offer(record(5, {"default_top_k": 2})) is None  # the next good one applies


def test_variants_get_the_base_with_their_overrides() -> None:
    live = Seen().live()
    live.offer(record(1, {"default_top_k": 3, "dense_weight": 2.0},
                      {"stable": {"weight": 1}, "canary": {
                          "weight": 1, "overrides": {"default_top_k": 8, "rerank": False}}}))
    got = {live.serve(f"c{i}", "q").variant for i in range(200)}
    assert got == {"stable", "canary"}
    canary = next(live.serve(f"c{i}", "q") for i in range(200)
                  if live.serve(f"c{i}", "q").variant == "canary")
    stable = next(live.serve(f"c{i}", "q") for i in range(200)
                  if live.serve(f"c{i}", "q").variant == "stable")
    assert (canary.settings.default_top_k, canary.settings.dense_weight, canary.rerank) == (
        8, 2.0, False)
    assert (stable.settings.default_top_k, stable.rerank) == (3, True)


KNOB_NAMES = sorted(Knobs.model_fields)
junk = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                 st.lists(st.integers(), max_size=2))


@settings(max_examples=300)
@given(st.dictionaries(st.one_of(st.sampled_from(KNOB_NAMES), st.text(max_size=12)), junk,
                       min_size=1, max_size=4),
       st.integers(-3, 3))
def test_a_random_record_is_applied_only_if_every_field_is_valid(knobs: dict[str, Any],
                                                                  version: int) -> None:
    seen = Seen()
    live = seen.live()
    live.offer(record(1))
    try:
        raw = record(version, knobs)
    except ValueError:  # NaN and infinities: not even JSON
        return
    refusal = live.offer(raw)
    if refusal is None:
        # Applied: then every knob was known, well typed and in range, and the version new.
        assert version > 1 and set(knobs) <= set(KNOB_NAMES)
        Knobs.model_validate(knobs)
        assert live.version == version
    else:
        assert live.version == 1 and seen.applied == [1]
        assert seen.refused == [refusal]
