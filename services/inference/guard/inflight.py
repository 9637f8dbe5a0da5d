"""Routed calls as the SLO guard sees them: from their start, not only once they finish.

Pure (a clock is passed in). The API opens a Watch on every routed call once its variant is
known and ends it once: finished, failed (no shards, no queue room) or cancelled (its caller
went away or a deadline passed: counted against the variant that served it, like an error).
A call still running past the latency objective is sampled as `overdue` once in every guard
window it stays in flight, so a variant whose calls hang is seen while they hang, not never
(a call that outlives its client's timeout never finishes as far as a latency table knows).
Each call adds at most one sample to a window: its end is not sampled in a window its
overdue mark already counted it in. `drain` hands the samples to the sender timer.
"""

from __future__ import annotations

import math
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from services.inference.guard.samples import GuardSample

BUFFER_MAX = 10_000  # ended calls waiting to be sent; the oldest go first when full
End = Literal["call", "error", "cancelled"]


@dataclass(eq=False)
class Watch:
    """One routed call; `end` counts once (later calls do nothing)."""

    owner: InFlight | None
    variant: str
    version: int
    started: float
    marked: float = -math.inf  # start of the window its last overdue sample counted it in
    ended: bool = False

    def end(self, kind: End | None) -> None:
        """How the call ended; None: not the variant's doing (a caller's mistake)."""
        if self.ended:
            return
        self.ended = True
        if self.owner is not None:
            self.owner.ended(self, kind)


UNWATCHED = Watch(None, "", 0, 0.0, ended=True)  # a call served with no variant


@dataclass
class InFlight:
    objective_ms: float
    window_s: float
    clock: Callable[[], float]  # seconds since the epoch
    # Weak: a Watch a handler dropped without ending (an exception it did not expect) goes
    # with the handler's frame instead of counting as in flight for ever.
    calls: weakref.WeakSet[Watch] = field(default_factory=weakref.WeakSet)
    samples: deque[GuardSample] = field(default_factory=lambda: deque(maxlen=BUFFER_MAX))

    def begin(self, variant: str, version: int) -> Watch:
        call = Watch(self, variant, version, self.clock())
        self.calls.add(call)
        return call

    def ended(self, call: Watch, kind: End | None) -> None:
        self.calls.discard(call)
        now = self.clock()
        if kind is None or call.marked == self._window(now):
            return
        self.samples.append(self._sample(call, kind, now))

    def drain(self) -> list[GuardSample]:
        """The samples of ended calls, and an overdue one for each call in flight past the
        objective that this window has not counted yet."""
        now = self.clock()
        window = self._window(now)
        for call in sorted(list(self.calls), key=lambda c: c.started):
            if (now - call.started) * 1000.0 > self.objective_ms and call.marked != window:
                call.marked = window
                self.samples.append(self._sample(call, "overdue", now))
        out = list(self.samples)
        self.samples.clear()
        return out

    def _window(self, now: float) -> float:
        return math.floor(now / self.window_s) * self.window_s

    def _sample(self, call: Watch, kind: str, now: float) -> GuardSample:
        latency_ms = max(0.0, now - call.started) * 1000.0
        return GuardSample.model_validate({
            "variant": call.variant, "config_version": call.version, "kind": kind, "at": now,
            "latency_ms": latency_ms, "slow": latency_ms > self.objective_ms})
