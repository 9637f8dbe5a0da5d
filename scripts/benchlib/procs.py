"""CPU and memory of a running mesh, read from /proc by process group.

Every process `streamrag up` starts (broker, chain, workers) leads its own process group and
writes its pid to <run dir>/pids/<name>.pid; a group's members are its threads' processes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

TICK_S = os.sysconf("SC_CLK_TCK")


def group_pids(run_dir: Path) -> dict[str, list[int]]:
    """{name: every live pid of its process group}: each child leads its own session."""
    leaders = {}
    for pid_file in (run_dir / "pids").glob("*.pid"):
        with contextlib.suppress(ValueError):
            leaders[int(pid_file.read_text())] = pid_file.stem
    out: dict[str, list[int]] = {name: [] for name in leaders.values()}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            pgid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
        except (OSError, IndexError, ValueError):
            continue
        if pgid in leaders:
            out[leaders[pgid]].append(int(proc.name))
    return out


def cpu_s(pid: int | None, missing: float = 0.0) -> float:
    """User + system CPU seconds of process `pid` so far; `missing` where /proc cannot say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return missing
    return (int(fields[11]) + int(fields[12])) / TICK_S  # utime + stime


def cpu_by_group(run_dir: Path) -> dict[str, float]:
    """CPU seconds each live process group of the mesh has used so far, by name."""
    return {name: sum(cpu_s(p) for p in pids)
            for name, pids in group_pids(run_dir).items() if pids}


def memory_gib(run_dir: Path) -> dict[str, Any]:
    """Summed RSS and peak RSS (VmHWM) of every process of the mesh, GiB, and RSS per
    process group (a service, the broker, anvil)."""
    rss = hwm = 0
    per: dict[str, float] = {}
    for name, pids in group_pids(run_dir).items():
        for pid in pids:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
                        per[name] = per.get(name, 0.0) + int(line.split()[1]) / 2**20
                    elif line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
    return {"rss": rss / 2**20, "peak": hwm / 2**20, "per_process": per}
