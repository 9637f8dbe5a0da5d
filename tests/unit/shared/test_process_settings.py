"""One data dir and one log level per process: every service reads STREAMRAG_DATA_DIR and
STREAMRAG_LOG_LEVEL, and the names they replaced stop a service instead of being ignored."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from shared.contract.topics import SERVICES
from shared.errors import ConfigError
from shared.settings import ProcessSettings, ServiceSettings, replacement


def service_classes() -> list[type[ServiceSettings]]:
    out = []
    for name in [*SERVICES, "onebox"]:
        module = importlib.import_module(f"services.{name}.settings")
        out += [c for c in vars(module).values() if isinstance(c, type)
                and issubclass(c, ServiceSettings) and c.__module__ == module.__name__]
    return out


def test_every_service_reads_the_one_data_dir_and_log_level(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STREAMRAG_LOG_LEVEL", "DEBUG")
    classes = service_classes()
    assert len(classes) == len(SERVICES) + 1
    for cls in [ProcessSettings, *classes]:
        settings = cls()
        assert (settings.data_dir, settings.log_level) == (tmp_path, "DEBUG"), cls.__name__


def test_an_argument_still_beats_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", "/elsewhere")
    from services.retrieval.settings import RetrievalSettings
    assert RetrievalSettings(data_dir=tmp_path).snapshot_dir == tmp_path / "retrieval-shards"


@pytest.mark.parametrize(("old", "new"), [
    ("STREAMRAG_INGEST_DATA_DIR", "STREAMRAG_DATA_DIR"),
    ("STREAMRAG_ONEBOX_LOG_LEVEL", "STREAMRAG_LOG_LEVEL"),
    ("STREAMRAG_LEDGERSVC_DATA_DIR", "STREAMRAG_DATA_DIR"),
    ("STREAMRAG_LEDGERSVC_RETRY_MAX_S", "STREAMRAG_LEDGER_RETRY_MAX_S"),
])
def test_a_retired_name_stops_a_service_naming_its_replacement(
        monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    assert replacement(old) == new
    monkeypatch.setenv(old, "x")
    from services.chunking.settings import ChunkingSettings
    # A ConfigError, not pydantic's ValidationError, whose text logs withhold.
    with pytest.raises(ConfigError, match=f"^{old} is no longer read: set {new} instead$"):
        ChunkingSettings()


@pytest.mark.parametrize("command", [["up", "--no-demo"], ["status"], ["worker", "onebox"]])
def test_every_command_refuses_a_retired_name_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    from services.cli.main import EXIT_CONFIG, main

    monkeypatch.setenv("STREAMRAG_ONEBOX_DATA_DIR", "/srv/streamrag")
    monkeypatch.setenv("STREAMRAG_INGEST_LOG_LEVEL", "DEBUG")
    assert main(command) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        f"streamrag {command[0]}: ConfigError: STREAMRAG_INGEST_LOG_LEVEL is no longer read: "
        "set STREAMRAG_LOG_LEVEL instead; STREAMRAG_ONEBOX_DATA_DIR is no longer read: set "
        "STREAMRAG_DATA_DIR instead\n")


def test_a_bad_value_names_its_variable_not_the_value(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from services.cli.main import EXIT_CONFIG, main

    monkeypatch.setenv("STREAMRAG_KAFKA_REPLICATION_FACTOR", "three-ish")
    assert main(["up", "--no-demo"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.startswith("streamrag up: ConfigError: STREAMRAG_KAFKA_REPLICATION_FACTOR: "
                          "Input should be a valid integer"), err
    assert "three-ish" not in err and "withheld" not in err


def test_names_still_read_are_not_retired() -> None:
    for name in ("STREAMRAG_DATA_DIR", "STREAMRAG_LEDGER_RPC_URL", "STREAMRAG_LEDGER_RETRY_MAX_S",
                 "STREAMRAG_INGEST_MAX_ID_LENGTH", "STREAMRAG_KAFKA_BOOTSTRAP"):
        assert replacement(name) is None, name


def test_the_data_dir_is_created_with_its_parents(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path / "a" / "b"))
    assert ProcessSettings().ensure_data_dir("streamrag-chunking") == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b" / "streamrag-chunking").is_dir()


def test_a_data_dir_under_a_file_fails_naming_the_setting_and_the_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path / "afile" / "data"))
    with pytest.raises(ConfigError) as caught:
        ProcessSettings().ensure_data_dir()
    assert str(caught.value) == (
        f"STREAMRAG_DATA_DIR={tmp_path}/afile/data: cannot create {tmp_path}/afile/data: "
        f"Not a directory ({tmp_path}/afile is a file, not a directory)")
