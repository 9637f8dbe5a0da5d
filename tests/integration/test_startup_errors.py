"""Every fatal start-up error names the setting or the file to fix, in one line.

Each failure runs as a real process, the way a person meets it: a worker whose data dir
cannot be made, `streamrag up` whose embedded broker's or dev chain's port another process
holds. Logs withhold exception text (shared/logsafe.py); these errors must still
say which path or port is wrong and which variable sets it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.mesh import free_port

ROOT = Path(__file__).resolve().parents[2]
STREAMRAG = str(Path(sys.executable).parent / "streamrag")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port bound (not listening) by this process: free to a probe, taken to a bind."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        yield int(sock.getsockname()[1])


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 60,
        ) -> tuple[int, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_")}
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                          env={**keep, "PYTHONPATH": str(ROOT), **env})
    return done.returncode, done.stdout + done.stderr


def assert_one_clear_line(out: str) -> None:
    assert "Traceback" not in out and "<withheld>" not in out, out


def test_a_data_dir_under_a_file_names_the_setting_and_the_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    data_dir = tmp_path / "afile" / "data"
    code, out = run([sys.executable, "-m", "services.chunking"],
                    {"STREAMRAG_DATA_DIR": str(data_dir),
                     "STREAMRAG_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}"}, tmp_path)
    assert code == 78, out  # EX_CONFIG: no restart helps until the setting changes
    assert (f"streamrag-chunking: STREAMRAG_DATA_DIR={data_dir}: cannot create {data_dir}: "
            f"Not a directory ({tmp_path}/afile is a file, not a directory)") in out, out
    assert_one_clear_line(out)


@pytest.mark.parametrize("setting", ["STREAMRAG_CHUNKING_METRICS_PORT",
                                     "STREAMRAG_WATCHDOG_METRICS_PORT"])
def test_one_more_worker_on_a_taken_metrics_port_fails_before_joining_its_group(
        tmp_path: Path, setting: str) -> None:
    """Started with the running worker's exact environment: it exits naming the setting,
    and never connects to the broker, so the group does not rebalance for it."""
    with socket.socket() as running, socket.socket() as broker:
        running.bind(("127.0.0.1", 0))
        running.listen()  # the running worker's /metrics
        port = running.getsockname()[1]
        broker.bind(("127.0.0.1", 0))
        broker.listen()
        code, out = run([STREAMRAG, "worker", "chunking"],
                        {"STREAMRAG_DATA_DIR": str(tmp_path / "data"),
                         "STREAMRAG_KAFKA_BOOTSTRAP": f"127.0.0.1:{broker.getsockname()[1]}",
                         setting: str(port)}, tmp_path)
        broker.setblocking(False)
        with pytest.raises(BlockingIOError):  # not one connection: no join, no metadata
            broker.accept()
    assert code == 78, out  # EX_CONFIG, as for any setting that must change first
    assert (f"streamrag-chunking: {setting}={port}: cannot listen on 127.0.0.1:{port}: "
            f"Address already in use (another worker or process holds it); set {setting} "
            "to a free port, or 0: not served") in out, out
    assert_one_clear_line(out)


def test_a_missing_data_dir_is_created_with_its_parents(tmp_path: Path) -> None:
    data_dir = tmp_path / "not" / "yet" / "there"
    # A broker that never answers: the worker gets as far as Faust's start, then stops
    # (or is stopped); the data dir is made before either.
    try:
        _, out = run([sys.executable, "-m", "services.chunking"],
                     {"STREAMRAG_DATA_DIR": str(data_dir),
                      "STREAMRAG_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}"}, tmp_path, 10)
    except subprocess.TimeoutExpired:
        out = ""
    assert "cannot create" not in out, out
    assert (data_dir / "streamrag-chunking").is_dir()


def up_env(tmp_path: Path, bootstrap: int, rpc: int) -> dict[str, str]:
    return {"STREAMRAG_MESH_RUN_DIR": str(tmp_path / "run"),
            "STREAMRAG_KAFKA_BOOTSTRAP": f"127.0.0.1:{bootstrap}",
            "STREAMRAG_LEDGER_RPC_URL": f"http://127.0.0.1:{rpc}",
            "STREAMRAG_MESH_ANVIL_BIN": str(ROOT / ".tools/node_modules/.bin/anvil"),
            "STREAMRAG_MESH_KAFKA_LIBS": str(ROOT / ".tools/kafka/libs")}


def test_up_names_the_broker_port_another_process_holds(tmp_path: Path,
                                                         taken_port: int) -> None:
    code, out = run([STREAMRAG, "up", "--no-demo", "--exit-after-demo"],
                    up_env(tmp_path, taken_port, free_port()), tmp_path)
    assert code == 1, out
    assert (f"streamrag up: InfrastructureError: STREAMRAG_KAFKA_BOOTSTRAP=127.0.0.1:"
            f"{taken_port}: broker could not start: 127.0.0.1:{taken_port} is in use by "
            "another process (stop it, or point STREAMRAG_KAFKA_BOOTSTRAP at a free port); "
            f"its log: {tmp_path}/run/logs/broker.log") in out, out
    assert_one_clear_line(out)


def test_up_names_the_chain_port_another_process_holds(tmp_path: Path,
                                                        taken_port: int) -> None:
    if not (ROOT / ".tools/node_modules/.bin/anvil").exists():
        pytest.skip("anvil is not installed (scripts/up installs it)")
    code, out = run([STREAMRAG, "up", "--no-demo", "--exit-after-demo"],
                    up_env(tmp_path, free_port(), taken_port), tmp_path)
    assert code == 1, out
    assert (f"streamrag up: InfrastructureError: STREAMRAG_LEDGER_RPC_URL=http://127.0.0.1:"
            f"{taken_port}: anvil could not start: 127.0.0.1:{taken_port} is in use by "
            "another process (stop it, or point STREAMRAG_LEDGER_RPC_URL at a free port)"
            ) in out, out
    assert_one_clear_line(out)


def test_up_names_a_run_dir_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    env = {**up_env(tmp_path, free_port(), free_port()),
           "STREAMRAG_MESH_RUN_DIR": str(tmp_path / "afile" / "run")}
    code, out = run([STREAMRAG, "up", "--no-demo", "--exit-after-demo"], env, tmp_path)
    assert code == 1, out
    assert (f"streamrag up: ConfigError: STREAMRAG_MESH_RUN_DIR={tmp_path}/afile/run: cannot "
            "create it: Not a directory") in out, out
    assert_one_clear_line(out)
