"""The guard runner against an in-memory config log: windows closed once, tier 1 and tier 2
written through the CLI's writer with the guard as author, an incident for each."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from services.inference.config.live import LiveConfig
from services.inference.guard.runner import GuardRunner
from services.inference.guard.samples import GuardSample, table_keys
from services.inference.settings import InferenceSettings
from services.inference.telemetry.metrics import InferenceMetrics
from shared.contract.records import GuardIncident
from shared.kafka.config_log import current, set_config

SIZE = 10.0


class FakeLog:
    def __init__(self) -> None:
        self.values: list[bytes | None] = []

    async def read(self) -> list[bytes | None]:
        return list(self.values)

    async def write(self, key: bytes, value: bytes) -> None:
        self.values.append(value)


def test_a_failing_canary_is_stopped_then_rolled_back() -> None:
    settings = InferenceSettings(guard_window_s=SIZE, guard_windows=2, guard_grace_s=SIZE)
    log, live = FakeLog(), LiveConfig(settings)
    windows: dict[float, Counter[str]] = {}
    incidents: list[GuardIncident] = []

    def counts(start: float) -> Any:
        return lambda key: windows.get(start, Counter())[key]

    async def sample(s: GuardSample) -> None:
        windows.setdefault(s.at - s.at % SIZE, Counter()).update(table_keys(s))

    async def incident(i: GuardIncident) -> None:
        incidents.append(i)

    runner = GuardRunner(settings, live, None, log, InferenceMetrics(),  # type: ignore[arg-type]
                         counts, sample, incident)

    async def write(*assignments: str) -> None:
        await set_config(log, assignments, [], "ann")
        live.offer(log.values[-1])

    async def window(t: float, canary_hit: bool) -> list[GuardIncident]:
        for variant, hit in (("stable", True), ("canary", canary_hit)):
            if variant in live.variants:
                await sample(GuardSample(variant=variant, kind="probe", at=t + 1, hit=hit))
        out = await runner.tick(now=t + SIZE + 2.5)  # closes the window [t, t + SIZE)
        if log.values and live.version < current(log.values).version:  # type: ignore[union-attr]
            live.offer(log.values[-1])
        return out

    async def scenario() -> None:
        await write("stable.weight=100")
        assert await window(0, True) == []  # the first window closed is never judged
        assert await window(10, True) == []
        assert await window(20, True) == []  # version 1 judged stable
        await write("canary.weight=10", "canary.default_top_k=1")
        assert await window(30, False) == []
        [stop] = await window(40, False)
        assert stop.tier == 1 and stop.version == 3 and stop.from_version == 2
        assert stop.diff == {"variants.canary.weight": (10, 0)}
        assert [w.breaches for w in stop.windows] == [("probe_hit_rate",)] * 2
        assert (stop.windows[0].probe_hit_rate, stop.windows[0].reference_probe_hit_rate) \
            == (0.0, 1.0)
        [back] = await window(50, False)
        assert back.tier == 2 and back.version == 4 and back.rollback_of == 1
        assert back.incident == stop.incident
        for t in (60, 70, 80):
            assert await window(t, False) == []

    asyncio.run(scenario())
    final = current(log.values)
    assert final is not None and final.author == "slo-guard" and final.rollback_of == 1
    assert list(final.variants) == ["stable"] and len(incidents) == 2
