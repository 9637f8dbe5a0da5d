"""`streamrag status`: each source's event time merged across ingest workers, and the
stream statistics rendered per source and domain."""

from __future__ import annotations

from pathlib import Path

from services.cli.status import event_time, render_event_time, render_stats
from shared.worker import members
from shared.worker.status_files import EVENT_TIME_FILE, write_json

T0 = 1_800_000_000.0
HIST = {"<=0s": 0, "<=1s": 0, "<=10s": 0}


def source(name: str, watermark: float, fresh: float, seen: int, late: int,
           partitions: dict[str, float], **hist: int) -> dict:
    return {"source": name, "watermark": watermark, "freshest_applied": fresh, "seen": seen,
            "late": late, "late_applied": late, "partitions": partitions,
            "lateness": {**HIST, **{k.replace("le", "<=") + "s": v for k, v in hist.items()}},
            "lag_s": None}


def test_two_workers_partitions_of_one_source_combine(tmp_path: Path) -> None:
    write_json(members.own_file(tmp_path / "streamrag-ingest", EVENT_TIME_FILE), {"sources": [
        source("crm", T0 - 300, T0 - 5, 10, 1, {"0": T0 - 300}, le0=9, le10=1)]})
    write_json(members.own_file(tmp_path / "streamrag-ingest-2", EVENT_TIME_FILE), {"sources": [
        source("crm", T0 - 200, T0 - 2, 4, 0, {"1": T0 - 200}, le0=4),
        source("wiki", T0 - 900, 0.0, 2, 0, {"3": T0 - 900}, le1=2)]})
    crm, wiki = event_time(tmp_path, now=T0)
    assert (crm["watermark"], crm["lag_s"], crm["seen"], crm["late"]) == (T0 - 300, 2.0, 14, 1)
    assert crm["partitions"] == {"0": T0 - 300, "1": T0 - 200}
    assert crm["lateness"] == {"<=0s": 13, "<=1s": 0, "<=10s": 1}
    assert wiki["lag_s"] is None  # nothing applied yet
    lines = render_event_time([crm, wiki]).splitlines()
    assert lines[1].split() == ["crm", "2027-01-15T07:55:00Z", "2.0s", "14", "1", "1",
                                "<=0s=13,", "<=10s=1"]
    assert lines[2].split()[2] == "-"


def test_stats_render_per_source_and_domain_or_say_why_not() -> None:
    stats = {"minute": {"counts": [{"source": "crm", "domain": "sales", "kind": "new",
                                    "count": 2}]},
             "hour": {"counts": [{"source": "crm", "domain": "sales", "kind": "new", "count": 7},
                                 {"source": "crm", "domain": "sales", "kind": "pii.PERSON",
                                  "count": 3}]}}
    assert render_stats(stats).splitlines()[1] == "  crm/sales: new=7, pii.PERSON=3 | new=2"
    assert render_stats("UNAVAILABLE") == "stream statistics: UNAVAILABLE"
