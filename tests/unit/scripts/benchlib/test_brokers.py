"""The before/after broker table: medians of the rounds and the ratio Kafka / memory broker."""

from __future__ import annotations

from scripts.benchlib.brokers import table


def test_each_figure_is_the_median_of_its_rounds_with_the_ratio() -> None:
    figures = [("ready (s)", lambda m: m["ready_s"]), ("journal", lambda m: m.get("j", 0.0))]
    before = [{"ready_s": 10.0, "j": 0.5}, {"ready_s": 30.0, "j": 0.5}, {"ready_s": 20.0}]
    after = [{"ready_s": 5.0}, {"ready_s": 50.0}, {"ready_s": 40.0}]
    text, rows = table(figures, before, after)
    assert rows["ready (s)"] == {"memory_broker": 20.0, "kafka": 40.0}
    assert rows["journal"] == {"memory_broker": 0.5, "kafka": 0.0}
    ready, journal = text.splitlines()[1:]
    assert ready.split()[-1] == "2.00"  # 40 / 20
    assert journal.split()[-1] == "0.00"
