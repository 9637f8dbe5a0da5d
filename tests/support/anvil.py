"""A real anvil node (Foundry's Ethereum dev node) for integration tests: its own port and
state file, restartable, killable."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from services.cli.mesh import free_port
from tests.support.polling import eventually

REPO = Path(__file__).resolve().parents[2]
ANVIL = shutil.which("anvil") or str(REPO / ".tools" / "node_modules" / ".bin" / "anvil")
needs_anvil = pytest.mark.skipif(not Path(ANVIL).exists(), reason="anvil not installed: "
                                 "npm install @foundry-rs/anvil in .tools/")
STATE_INTERVAL_S = 1  # anvil writes its state file this often


class Anvil:
    """One anvil process on a fixed port and state file; restartable."""

    def __init__(self, port: int, state: Path, log: Path) -> None:
        self.port, self.state, self.log = port, state, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [ANVIL, "--port", str(self.port), "--state", str(self.state),
               "--state-interval", str(STATE_INTERVAL_S), "--silent"]
        # Its own process group: the npm `anvil` is a node wrapper around the real binary,
        # and a signal to the wrapper alone would leave the node running.
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        eventually(self._ready, f"anvil on {self.url} to answer eth_chainId", 30, 0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: anvil writes its state file on the way out; SIGKILL: it does not."""
        if self.proc is not None:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=30)
            # The real node (the wrapper's child) is gone too.
            eventually(lambda: not self.answers(), f"anvil on {self.url} to stop", 30, 0.05)
        self.proc = None

    def answers(self) -> bool:
        """Whether anything accepts connections on the node's port."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def wait_saved(self) -> None:
        """Until everything the node held when called is in its state file: two writes from
        now, as the first one seen may have started before the call."""
        for n in (1, 2):
            seen = self._written()

            def rewritten(seen: int = seen) -> bool:
                return self._written() != seen
            eventually(rewritten, f"anvil's state file write {n} of 2", 10 * STATE_INTERVAL_S,
                       0.02)

    def _written(self) -> int:
        return self.state.stat().st_mtime_ns if self.state.exists() else 0

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
        body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        try:
            return requests.post(self.url, json=body, timeout=1).ok
        except requests.ConnectionError:
            return False


@contextmanager
def running_anvil(folder: Path) -> Iterator[Anvil]:
    """A fresh node keeping its state file and log in `folder`, stopped on the way out."""
    node = Anvil(free_port(), folder / "anvil-state.json", folder / "anvil.log")
    node.start()
    try:
        yield node
    finally:
        node.stop()
