"""Per-hop delays from first-seen timestamps: only keys seen on both sides of a hop count."""

from __future__ import annotations

from scripts.benchlib.hops import hop_delays


def test_each_hop_is_the_difference_of_first_stamps_for_keys_on_both_topics() -> None:
    topics = ("a", "b", "c")
    stamps = {"a": {"d1": 100, "d2": 110, "lost": 120}, "b": {"d1": 130, "d2": 111},
              "c": {"d1": 180}}
    delays = hop_delays(stamps, ["d1", "d2", "lost"], topics)
    assert delays == {"a -> b": [30.0, 1.0], "b -> c": [50.0]}
