"""`streamrag up` starts one worker for every service by default, one per service with
--processes; the processes it would spawn are recorded instead of started."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.cli import mesh as mesh_module
from services.cli.main import build_parser
from services.cli.mesh import ONEBOX, START_ORDER, Mesh
from services.cli.settings import MeshSettings
from shared.settings import KafkaSettings, LedgerSettings


class Spawned:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.popen = type("P", (), {"pid": 1})()
        self.log_path = Path("/dev/null")


def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, processes: bool,
            names: tuple[str, ...] = START_ORDER) -> list[Spawned]:
    out: list[Spawned] = []

    def spawn(name: str, argv: list[str], run_dir: Path, env: dict[str, str] | None = None,
              ) -> Any:
        out.append(Spawned(name, argv, env or {}))
        return out[-1]

    monkeypatch.setattr(mesh_module, "spawn", spawn)
    mesh = Mesh(MeshSettings(run_dir=tmp_path, processes=processes), KafkaSettings(),
                LedgerSettings(), {"STREAMRAG_X": "1"})
    mesh.start_services(names)
    return out


def test_default_is_one_worker_hosting_every_service(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    (one,) = started(monkeypatch, tmp_path, processes=False)
    assert one.name == ONEBOX and one.argv[1:] == ["-m", "services.onebox"]
    assert json.loads(one.env["STREAMRAG_ONEBOX_SERVICES"]) == list(START_ORDER)
    assert one.env["STREAMRAG_X"] == "1"


def test_a_subset_in_one_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (one,) = started(monkeypatch, tmp_path, False, ("ingest", "redaction"))
    assert json.loads(one.env["STREAMRAG_ONEBOX_SERVICES"]) == ["ingest", "redaction"]


def test_processes_starts_one_per_service(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    got = started(monkeypatch, tmp_path, processes=True)
    assert [s.name for s in got] == list(START_ORDER)
    assert [s.argv[2] for s in got] == [f"services.{n}" for n in START_ORDER]


def test_up_flag() -> None:
    assert build_parser().parse_args(["up", "--processes"]).processes is True
    assert build_parser().parse_args(["up"]).processes is False
    assert MeshSettings().processes is False  # one process is the embedded default


@pytest.mark.parametrize("processes", [False, True])
def test_every_process_keeps_its_state_under_the_run_dir(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path, processes: bool) -> None:
    got = started(monkeypatch, tmp_path, processes)
    # where `streamrag status` reads the stage counters
    assert {s.env["STREAMRAG_DATA_DIR"] for s in got} == {str(tmp_path / "data")}

