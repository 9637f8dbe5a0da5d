"""Child processes of the embedded mesh: start with a log file and pid file, stop cleanly."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from shared.errors import InfrastructureError
from shared.worker.status_files import replace_file


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.popen.poll() is None


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def port_taken(host: str, port: int) -> bool:
    """True when another process holds host:port, listening or not (a bind fails)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        return False


def wait_port(host: str, port: int, timeout_s: float, child: Child | None = None,
              setting: str = "") -> None:
    """Until something listens on host:port; `child`, the process that should, exiting
    first fails naming `setting` (the variable that chose the address) and why."""
    deadline = time.monotonic() + timeout_s
    where = f"{setting}: " if setting else ""
    while not port_open(host, port):
        if child is not None and not child.alive():
            name = setting.partition("=")[0] or "its address"
            why = (f"{host}:{port} is in use by another process (stop it, or point {name} "
                   "at a free port)" if port_taken(host, port) else
                   f"it exited with code {child.popen.returncode} before listening on "
                   f"{host}:{port}")
            msg = f"{where}{child.name} could not start: {why}; its log: {child.log_path}"
            raise InfrastructureError(msg)
        if time.monotonic() > deadline:
            msg = f"{where}nothing listens on {host}:{port} after {timeout_s:.0f}s"
            raise InfrastructureError(msg)
        time.sleep(0.1)


# Children die with the process that started them, even when it is killed with -9 and cannot
# stop them: util-linux's setpriv sets PR_SET_PDEATHSIG (kept across exec) before running
# the child. The signal follows the *thread* that spawned the child, so the supervisor's
# thread lives as long as the process (services/cli/supervise.py).
SETPRIV = shutil.which("setpriv")
DIE_WITH_PARENT = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []


def spawn(name: str, argv: list[str], run_dir: Path, env: dict[str, str] | None = None) -> Child:
    logs, pids = run_dir / "logs", run_dir / "pids"
    logs.mkdir(parents=True, exist_ok=True)
    pids.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            [*DIE_WITH_PARENT, *argv], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True)
    # In one step: a reader polling for a restart (scripts, tests, an operator's watch)
    # must never find the file empty between truncate and write.
    replace_file(pids / f"{name}.pid", str(popen.pid))
    return Child(name, popen, log_path)


def kill_group(child: Child) -> None:
    """SIGKILL what is left of a child's process group once the child itself is gone: a
    wrapper killed with -9 (anvil's node launcher) leaves its real process running."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.popen.pid, signal.SIGKILL)


def service_argv(name: str) -> list[str]:
    return [sys.executable, "-m", f"services.{name}"]


def stop(children: list[Child], timeout_s: float) -> None:
    """SIGTERM everyone (newest first), then SIGKILL whoever is left after the timeout."""
    for child in reversed(children):
        if child.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.popen.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for child in reversed(children):
        remaining = max(0.1, deadline - time.monotonic())
        try:
            child.popen.wait(remaining)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.popen.pid, signal.SIGKILL)
            child.popen.wait()
        pid_file = child.log_path.parent.parent / "pids" / f"{child.name}.pid"
        pid_file.unlink(missing_ok=True)


def stop_stale(run_dir: Path, timeout_s: float = 10.0) -> list[str]:
    """Stop processes left by an earlier run that did not shut down (re-running is safe)."""
    stopped = []
    for pid_file in sorted((run_dir / "pids").glob("*.pid")):
        pid = int(pid_file.read_text() or 0)
        if pid and _is_ours(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            stopped.append(pid_file.stem)
            deadline = time.monotonic() + timeout_s
            while _is_ours(pid, settle_s=0) and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)
    return stopped


def _is_ours(pid: int, settle_s: float = 2.0) -> bool:
    return any(w in _cmdline(pid, settle_s) for w in (b"services.", b"kafka.Kafka", b"anvil"))


def _cmdline(pid: int, settle_s: float) -> bytes:
    """The process's command line; b"" when it is gone or a zombie. A process caught inside
    its exec (Popen has returned, the kernel has not yet mapped the new arguments) reads
    as empty for a moment, so an empty one is read again for up to `settle_s`: a Ctrl-C
    right after a spawn would otherwise leave that process running."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            zombie = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z"
        except (OSError, IndexError):
            return b""
        if cmdline or zombie or time.monotonic() >= deadline:
            return cmdline
        time.sleep(0.01)
