"""`streamrag up` stops its mesh on Ctrl-C (SIGINT) and on SIGTERM, also when it was
started with SIGINT ignored, as a shell starts a background job (`streamrag up &`, nohup):
before, such an `up` ignored Ctrl-C and had to be killed, leaving its stop undone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
# `up.run` over a mesh that only records what is asked of it (no broker, no node).
CHILD = """
import argparse, pathlib, sys
from services.cli import up

class FakeMesh:
    run_dir = pathlib.Path("run")

    def __init__(self, *args):
        pass
    def start_infrastructure(self):
        print("started", flush=True)
    def start_services(self):
        pass
    def wait_ready(self):
        print("ready", flush=True)
    def timeline_table(self):
        return "start-up timeline:"
    def stop(self):
        print("stopped", flush=True)

up.Mesh = FakeMesh
args = argparse.Namespace(processes=False, no_demo=True, exit_after_demo=False)
sys.exit(up.run(args))
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_mesh_even_with_sigint_ignored_by_the_parent(sig: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=_ignore_sigint)
    try:
        assert child.stdout is not None
        assert [child.stdout.readline().strip() for _ in range(2)] == ["started", "ready"]
        time.sleep(0.5)  # inside the wait loop
        child.send_signal(sig)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == 0, out
    assert "stopping the mesh" in out and out.strip().endswith("stopped"), out
