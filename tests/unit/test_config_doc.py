"""docs/configuration.md is what scripts/gen_config makes from the settings classes today."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_config"
    loader = importlib.machinery.SourceFileLoader("gen_config", str(path))
    spec = importlib.util.spec_from_loader("gen_config", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_configuration_page_matches_the_settings_classes() -> None:
    expected = load_generator().render()
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == expected, "docs/configuration.md is out of date: run scripts/gen_config"


def test_every_prefix_and_a_known_setting_are_listed() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for prefix in ("KAFKA", "LEDGER", "MESH", "WATCHDOG", "AUDIT", "INGEST", "REDACTION",
                   "CHUNKING", "EMBEDDING", "RETRIEVAL", "INFERENCE", "ONEBOX", "LEDGERSVC"):
        assert f"## `STREAMRAG_{prefix}_*`" in page, prefix
    assert "| `STREAMRAG_KAFKA_FETCH_MAX_WAIT_MS` | `int` | `50` |" in page
