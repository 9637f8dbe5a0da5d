"""The SLO guard at work: probes each window, closes windows, applies the tiers' decisions.

No Faust here: agents.py hands it the window table's counts, the senders of samples and
incidents, and runs it only on the instance assigned guard.samples.v1's one partition.
Decisions are applied through shared/kafka/config_log.py, the writer of `streamrag config
set|rollback`: tier 1 is `set <variant>.weight=0`, tier 2 `rollback <stable version>`,
both with the guard as author, so history shows them and a person can undo them; tier 0
writes nothing, its incident is the report.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from services.inference.config.live import LiveConfig
from services.inference.engine import QueryEngine
from services.inference.errors import NoShardsError, NotReadyError
from services.inference.guard.objectives import Objectives, reference
from services.inference.guard.samples import GuardSample, figures
from services.inference.guard.tiers import AUTHOR, Decision, Guard, diff, routed
from services.inference.query import parse_params
from services.inference.settings import InferenceSettings
from services.inference.telemetry.metrics import InferenceMetrics
from shared.contract.access import Access
from shared.contract.query_config import QueryConfig
from shared.contract.records import GuardIncident, GuardWindow
from shared.errors import InvalidInput
from shared.kafka.config_log import ConfigLog, rollback, set_config

log = logging.getLogger(__name__)
PROBE_DEPTH = 10  # hit rate at 10
CLOSE_LAG_S = 2.0  # samples reach the table up to ~1 s late (the latency sender's timer)

Counts = Callable[[float], Callable[[str], int]]  # window start -> (key -> count)


class GuardRunner:
    def __init__(self, settings: InferenceSettings, live: LiveConfig, engine: QueryEngine,
                 config_log: ConfigLog, metrics: InferenceMetrics, counts: Counts,
                 send_sample: Callable[[GuardSample], Awaitable[None]],
                 send_incident: Callable[[GuardIncident], Awaitable[None]]) -> None:
        self.settings, self.live, self.engine = settings, live, engine
        self.config_log, self.metrics, self.counts = config_log, metrics, counts
        self.send_sample, self.send_incident = send_sample, send_incident
        policy = settings.guard
        self.guard = Guard(Objectives(policy.p99_ms, policy.max_error_rate,
                                      policy.quality_ratio, policy.min_calls),
                           policy.windows, policy.grace_s, policy.rollback_main)
        self.size = policy.window_s
        self._closed = self._probed = -math.inf

    async def tick(self, now: float | None = None) -> list[GuardIncident]:
        """Probe the current window once; close the last finished one once."""
        now = time.time() if now is None else now
        current = math.floor(now / self.size) * self.size
        if current > self._probed and self.settings.guard.probes:
            self._probed = current
            await self.probe()
        last = math.floor((now - CLOSE_LAG_S) / self.size) * self.size - self.size
        if last <= self._closed:
            return []
        first = self._closed == -math.inf
        self._closed = last
        # A guard just started (or just handed the partition) has not seen the window's
        # start: it judges from the next one.
        return [] if first else await self.close(last)

    async def probe(self) -> None:
        config = self.live.config
        names = routed(config) + [n for n in [reference(config)] if n and n not in routed(config)]
        await asyncio.gather(*(self._probe(name, config) for name in names))

    async def _probe(self, variant: str, config: QueryConfig | None) -> None:
        served = self.live.forced(variant)
        if served is None:
            return
        for probe in self.settings.guard.probes:
            # Probes judge the variant, not a caller: they search everything.
            params = replace(parse_params(served.settings, question=probe.question,
                                          now=time.time(), access=Access.everything()),
                             served=served)
            try:
                retrieval = await self.engine.retrieve(params, served.settings.shard_timeout_s)
                hit = any(h.doc_id == probe.doc_id
                          for h in retrieval.result.hits[:PROBE_DEPTH])
            except NotReadyError:
                return  # warming up: no figure rather than a false miss
            except NoShardsError:
                hit = False  # the variant's search timed out: it found nothing
            await self.send_sample(GuardSample(variant=variant, kind="probe", at=time.time(),
                                               config_version=served.version, hit=hit))

    async def close(self, start: float) -> list[GuardIncident]:
        config = self.live.config
        count = self.counts(start)
        window = {n: f for n in {*routed(config), *(n for n in [reference(config)] if n)}
                  if (f := figures(n, count)) is not None}
        decisions = self.guard.close_window(start, start + self.size, window, config)
        self.metrics.guard_windows.inc()
        for name in routed(config):
            self.metrics.guard_breaches.labels(variant=name).set(
                self.guard.breaking().get(name, 0))
        return [await self.apply(d) for d in decisions]

    async def apply(self, decision: Decision) -> GuardIncident:
        written: QueryConfig | None = None
        try:
            if decision.content is not None and decision.kind == "stop":
                written = await set_config(self.config_log, [f"{decision.variant}.weight=0"],
                                           [], AUTHOR, decision.note)
            elif decision.content is not None and decision.rollback_of is not None:
                written = await rollback(self.config_log, decision.rollback_of, AUTHOR,
                                         decision.note)
        except InvalidInput as exc:  # a concurrent writer: history shows what happened
            log.warning("slo guard: version not written: %s (%s)", exc.reason, exc.detail)
        self.metrics.guard_actions.labels(tier=str(decision.tier)).inc()
        log.warning("slo guard, tier %d (%s): %s", decision.tier, decision.kind, decision.note)
        incident = incident_of(decision, written, time.time())
        await self.send_incident(incident)
        return incident


def incident_of(decision: Decision, written: QueryConfig | None, at: float) -> GuardIncident:
    before = decision.from_config.content() if decision.from_config else {}
    windows = tuple(GuardWindow(
        start=w.start, end=w.end, calls=w.figures.calls, errors=w.figures.errors,
        p99_ms=w.figures.p99_ms, probe_hit_rate=w.figures.probe_hit_rate,
        reference_probe_hit_rate=w.reference.probe_hit_rate if w.reference else None,
        clicks=w.figures.clicks, skips=w.figures.skips, breaches=w.breaches, shared=w.shared,
        slow=w.figures.slow, overdue=w.figures.overdue, cancelled=w.figures.cancelled)
        for w in decision.windows)
    return GuardIncident(
        incident=decision.incident, variant=decision.variant, tier=decision.tier,
        kind=decision.kind, needed_qps=decision.needed_qps, at=at,
        from_version=decision.from_config.version if decision.from_config else 0,
        version=written.version if written else None,
        rollback_of=written.rollback_of if written else None, note=decision.note[:512],
        windows=windows, diff=diff(before, written.content()) if written else {})
