"""The mesh's worker processes seen the way an operator finds them: by their pid files."""

from __future__ import annotations

from pathlib import Path

from services.cli.mesh import Endpoints


def pid_of(mesh: Endpoints, name: str) -> int:
    """The pid the supervisor last wrote (0 while it is rewriting the file)."""
    try:
        return int((mesh.run_dir / "pids" / f"{name}.pid").read_text())
    except ValueError:
        return 0


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead too
