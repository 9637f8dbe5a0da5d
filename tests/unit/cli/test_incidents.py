"""`streamrag status` shows the SLO guard's incidents: windows, figures and the diff."""

from __future__ import annotations

from services.cli.incidents import as_json, render
from shared.contract.codec import decode, encode
from shared.contract.records import GuardIncident, GuardWindow


def incident() -> GuardIncident:
    window = GuardWindow(start=1764627000.0, end=1764627030.0, calls=40, errors=0,
                         p99_ms=180.0, probe_hit_rate=0.0, reference_probe_hit_rate=1.0,
                         clicks=0, skips=0, breaches=("probe_hit_rate",))
    return GuardIncident(incident="canary@7@1764627060", variant="canary", tier=1,
                         at=1764627062.0, from_version=7, version=8,
                         note="slo-guard: stop routing to canary", windows=(window,),
                         diff={"variants.canary.weight": (10, 0)})


def test_an_incident_survives_the_topic_and_renders_its_figures() -> None:
    record = decode(GuardIncident, encode(incident()))
    assert record == incident()
    text = render([record])
    assert "tier 1  canary: wrote version 8 (from 7)" in text
    assert "probe_hit_rate; calls 40 (slow 0, in flight 0, cancelled 0), p99 180 ms" in text
    assert "variants.canary.weight: 10 -> 0" in text
    assert as_json([record])[0]["diff"] == {"variants.canary.weight": [10, 0]}
    assert render([]).endswith("none")


def test_a_report_shows_its_kind_shared_breaches_and_the_calls_in_flight() -> None:
    window = GuardWindow(start=1764627000.0, end=1764627030.0, calls=12, errors=2,
                         p99_ms=1722.0, probe_hit_rate=None, reference_probe_hit_rate=None,
                         clicks=0, skips=0, breaches=(), shared=("p99",), slow=12,
                         overdue=9, cancelled=2)
    report = GuardIncident(incident="stable@7@1764627090", variant="stable", tier=0,
                           kind="shared", at=1764627092.0, from_version=7,
                           note="slo-guard: p99 broken by every variant", windows=(window,))
    record = decode(GuardIncident, encode(report))
    assert record == report
    text = render([record])
    assert "tier 0 shared  stable: wrote nothing (from 7)" in text
    assert "p99 (shared); calls 12 (slow 12, in flight 9, cancelled 2), p99 1722 ms" in text
