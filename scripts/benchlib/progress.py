"""Progress lines for long loops: `label: done/total (rate/s, ETA)`."""

from __future__ import annotations

import time


class Progress:
    """`label: done/total (rate/s, ETA)` at most every `every_s` seconds, and at the end."""

    def __init__(self, label: str, total: int, unit: str = "", every_s: float = 10.0) -> None:
        self.label, self.total, self.unit, self.every_s = label, total, unit, every_s
        self.started = self.shown = time.perf_counter()
        self.done = 0

    def add(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.shown >= self.every_s or self.done >= self.total:
            self.shown = now
            rate = self.done / max(now - self.started, 1e-9)
            eta = (self.total - self.done) / rate if rate else 0.0
            print(f"    {self.label}: {self.done}/{self.total} ({rate:.1f} {self.unit}/s"
                  + (f", ~{eta:.0f}s left)" if self.done < self.total else
                     f", {now - self.started:.0f}s)"), flush=True)
