"""docs/configuration.md is what scripts/gen_config makes from the settings classes today."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from shared.settings import env_names
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    return load_script("gen_config")


def test_configuration_page_matches_the_settings_classes() -> None:
    expected = load_generator().render()
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == expected, "docs/configuration.md is out of date: run scripts/gen_config"


def test_every_prefix_and_a_known_setting_are_listed() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for prefix in ("", "KAFKA_", "LEDGER_", "MESH_", "WATCHDOG_", "AUDIT_", "INGEST_",
                   "REDACTION_", "CHUNKING_", "EMBEDDING_", "RETRIEVAL_", "INFERENCE_", "ONEBOX_",
                   "TRACING_"):
        assert page.count(f"## `STREAMRAG_{prefix}*`") == 1, prefix  # one section per prefix
    assert "LEDGERSVC" not in page.replace("`STREAMRAG_LEDGERSVC_*`, now", "")
    assert "| `STREAMRAG_KAFKA_QUERY_FETCH_MAX_WAIT_MS` | `int` | `500` |" in page


def test_the_process_wide_settings_are_listed_once_under_their_own_names() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page.count("| `STREAMRAG_DATA_DIR` | `Path` | `.run/data` |") == 1
    assert page.count("| `STREAMRAG_LOG_LEVEL` | `str` | `INFO` |") == 1
    assert "_DATA_DIR` |" not in page.replace("`STREAMRAG_DATA_DIR` |", "")


def test_every_setting_has_a_meaning_of_its_own() -> None:
    gen = load_generator()
    documented = set(gen.settings_classes())
    for prefix, classes in gen.sections().items():
        meanings = [(env, text) for cls in classes for env, _, _, text in gen.rows(cls, documented)]
        assert meanings, prefix
        for env, text in meanings:
            assert text.strip(" ."), f"{env} has no comment of its own in its settings class"
        texts = [text for _, text in meanings]
        repeated = {t for t in texts if texts.count(t) > 1}
        assert not repeated, f"{prefix}*: settings share a meaning: {repeated}"


def test_classes_sharing_a_prefix_never_share_a_variable() -> None:
    gen = load_generator()
    for prefix, classes in gen.sections().items():
        names = [n for cls in classes for n in env_names(cls).values() if n.startswith(prefix)]
        assert len(names) == len(set(names)), prefix
