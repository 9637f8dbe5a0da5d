"""Inference keeps the newest drift window and event per key and shows them in Stats."""

from __future__ import annotations

from services.inference.api.convert import stats_response
from services.inference.telemetry.drift import drift_key, merge, states
from services.inference.telemetry.streamstats import WindowCounts
from shared.contract.records import DriftDocument, DriftReport
from shared.rpc.streamrag.v1 import inference_pb2 as pb


def report(start: float, status: str = "stable", source: str = "crm",
           domain: str = "support") -> DriftReport:
    extra = {"documents": (DriftDocument(doc_id="d9", version=2, title="Disk", distance=0.8),),
             "terms": ("disk", "quota")} if status == "drift" else {}
    return DriftReport.model_validate({
        "source": source, "domain": domain, "model_id": "m", "window_start": start,
        "window_end": start + 60, "docs": 30, "status": status, "score": 0.1, "z": 0.4,
        "mean": 0.0, "std": 0.25, "history": 10, "threshold": 2.5, "at": start + 70,
        **extra})


def test_the_newest_window_and_the_last_event_are_kept_and_replays_change_nothing() -> None:
    value = ""
    for r in (report(0), report(60, "drift"), report(120), report(30)):  # 30: a replay
        value = merge(value, r)
    (state,) = states([(drift_key(report(0)), value)])
    assert state.latest.window_start == 120
    assert state.last_event is not None and state.last_event.window_start == 60


def test_states_are_filtered_by_source_and_domain_and_sorted() -> None:
    items = [(drift_key(r), merge("", r)) for r in (
        report(0, source="web"), report(0, source="crm", domain="sales"), report(0))]
    assert [(s.latest.source, s.latest.domain) for s in states(items)] == [
        ("crm", "sales"), ("crm", "support"), ("web", "support")]
    assert [s.latest.domain for s in states(items, source="crm", domain="sales")] == ["sales"]


def test_stats_carries_the_drift_states() -> None:
    (state,) = states([("k", merge(merge("", report(60, "drift")), report(120)))])
    resp = stats_response(pb.STATS_WINDOW_MINUTE, WindowCounts(0, 60, [], [state]))
    (drift,) = resp.drift
    assert (drift.source, drift.domain, drift.model_id) == ("crm", "support", "m")
    assert drift.latest.status == "stable" and drift.latest.HasField("z")
    assert drift.last_event.status == "drift" and list(drift.last_event.terms) == ["disk", "quota"]
    assert drift.last_event.documents[0].doc_id == "d9"
    empty = stats_response(pb.STATS_WINDOW_MINUTE, WindowCounts(0, 60, []))
    assert not empty.drift
