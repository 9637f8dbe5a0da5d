"""`streamrag status` shows each source's drift: the newest window and the last event."""

from __future__ import annotations

from services.cli.status import drift_state, render_stats
from shared.rpc.streamrag.v1 import inference_pb2 as pb

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def test_the_newest_window_and_the_last_event_are_shown_per_source_domain_and_model() -> None:
    event = pb.DriftWindow(window_start=T0 - 120, window_end=T0 - 60, docs=31, status="drift",
                           z=7.25, score=2.0, terms=["incident", "disk"],
                           documents=[pb.DriftDocument(doc_id="inc-7", version=1)])
    latest = pb.DriftWindow(window_start=T0, window_end=T0 + 60, docs=12,
                            status="too_few_docs")
    state = drift_state(pb.DriftState(source="ops", domain="it", model_id="m", latest=latest,
                                      last_event=event))
    assert "z" not in state["latest"]  # unset, not 0
    text = render_stats({"minute": {"counts": []}, "hour": {"counts": []}, "drift": [state]})
    line = text.splitlines()[-1]
    assert line.startswith("  ops/it [m]: too_few_docs docs=12 at 2027-01-15T08:00:00Z")
    assert "DRIFT at 2027-01-15T07:58:00Z z=7.2 words: incident, disk docs: inc-7" in line
    quiet = drift_state(pb.DriftState(source="ops", domain="it", model_id="m",
                                      latest=pb.DriftWindow(status="stable", z=0.5, docs=40)))
    assert render_stats({"drift": [quiet]}).splitlines()[-1].endswith(
        "stable z=0.5 docs=40 at 1970-01-01T00:00:00Z")
    assert render_stats({"drift": []}).splitlines()[-1] == "  no drift windows closed yet"
