"""The one-process app hosts every service's agents, tables and subscriptions, by contract.

Built in a child process: building a service wires its agents module to the app it was
built on (one topology per process), and the other unit tests use their own builds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.contract.topics import ONEBOX_APP, SEARCH_REPLIES, SERVICE_INPUTS, SERVICES, TABLES

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import json
from services.onebox.app import build
from services.onebox.settings import OneboxSettings
from shared.settings import KafkaSettings
app, _ = build(OneboxSettings(), KafkaSettings())
print(json.dumps({
    "id": app.conf.id,
    "agents": sorted(app.agents),
    "subscribed": sorted({t for a in app.agents.values() for t in a.channel.topics}),
    "changelogs": sorted(t.changelog_topic.get_topic_name() for t in app.tables.values()),
    "services": sorted({a.split(".")[1] for a in app.agents}),
}))
"""


def built(tmp_path: Path, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT),
             "STREAMRAG_DATA_DIR": str(tmp_path), **env}, timeout=300)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_one_app_consumes_every_service_input_and_keeps_contract_changelogs(
        tmp_path: Path) -> None:
    got = built(tmp_path)
    assert got["id"] == ONEBOX_APP  # one consumer group for the whole worker
    assert got["services"] == sorted(SERVICES)
    # Search replies are read by inference's own reply reader, outside the group.
    inputs = {t.name for topics in SERVICE_INPUTS.values() for t in topics} - {
        SEARCH_REPLIES.name}
    assert set(got["subscribed"]) == inputs  # type: ignore[arg-type]
    # Named by the service that owns each table, not by the app hosting it.
    assert got["changelogs"] == sorted(t.changelog for t in TABLES)


def test_a_subset_hosts_only_the_services_named(tmp_path: Path) -> None:
    got = built(tmp_path, STREAMRAG_ONEBOX_SERVICES='["ingest", "chunking"]')
    assert got["services"] == ["chunking", "ingest"]
    assert set(got["subscribed"]) == {"docs.raw.v1", "docs.parsed.v1",  # type: ignore[arg-type]
                                      "docs.redacted.v1"}


def test_an_unknown_service_name_fails_at_start() -> None:
    from services.onebox.settings import OneboxSettings

    with pytest.raises(ValueError, match="STREAMRAG_ONEBOX_SERVICES: unknown services"):
        OneboxSettings(services=("ingest", "indexer"))
