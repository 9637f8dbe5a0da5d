"""The guard's sample agent under Faust's test context: samples land in the window table
as the runner reads it back (guard_counts, figures); bad records are dead-lettered."""

from __future__ import annotations

import asyncio
import json
import time

from services.inference.guard.objectives import Figures
from services.inference.guard.samples import GuardSample, figures
from tests.support import built
from tests.unit.inference.fakes import drive_agent

agents = built.stage("inference")  # a stage of its own


def sample(variant: str, kind: str, **kw: object) -> bytes:
    return GuardSample.model_validate({"variant": variant, "kind": kind, "at": 0.0, **kw}
                                      ).model_dump_json().encode()


def test_samples_become_the_window_figures_the_guard_judges() -> None:
    values = [*(sample("stable", "call", latency_ms=40.0) for _ in range(9)),
              sample("stable", "error", latency_ms=3000.0),
              sample("canary", "probe", hit=True), sample("canary", "probe", hit=False),
              sample("canary", "click"), b'{"variant": "stable"}']
    size = agents.settings.guard.window_s

    before = time.time()

    def read() -> tuple[Figures | None, Figures | None]:
        # The samples' window, or two if a boundary fell while they were put.
        starts = {t - t % size for t in (before, time.time())}
        counts = [agents.guard_counts(start) for start in starts]

        def count(key: str) -> int:
            return sum(c(key) for c in counts)
        return figures("stable", count), figures("canary", count)

    (stable, canary), dead = asyncio.run(drive_agent(agents, agents.count_guard_samples,
                                                     values, read))
    assert stable is not None and canary is not None
    assert (stable.calls, stable.errors, stable.p99_ms > 2000) == (10, 1, True)
    assert (canary.calls, canary.probe_hit_rate, canary.clicks) == (0, 0.5, 1)
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"]) == ("inference", "invalid_field")
