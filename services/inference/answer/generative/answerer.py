"""The generative answer step: pack the prompt, queue one generation job, stream its deltas.

Jobs go through a shared.batching Batcher whose runner is the decode loop (decode.py); with
continuous batching the loop admits jobs that queue while it runs. Each answer's pace feeds
`auto`'s estimate (pace.py); when auto quotes on that estimate and nothing is queued, a short
generation at bulk priority measures the pace again (`recheck`), so an estimate taken under
start-up load does not keep auto quoting for good.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING

from services.inference.answer.generative.decode import Finished, GenerationRunner, Job
from services.inference.answer.generative.pace import Pace
from services.inference.answer.generative.prompt import pack_prompt
from services.inference.answer.modes import GeneratorLoad
from services.inference.answer.result import Answer
from services.inference.query import QueryParams
from services.inference.settings import InferenceSettings
from services.inference.telemetry.metrics import BatcherMetrics, InferenceMetrics
from shared.batching.batcher import Batcher
from shared.batching.queue import BULK, INTERACTIVE, BatchLimits, QueueFullError
from shared.errors import InfrastructureError

if TYPE_CHECKING:  # it imports torch, loaded only when a generator is configured
    from services.inference.answer.generative.model import CausalLM

ANSWER_MODE = "generative"
PROBE_TOKENS = 16  # decoded by a measurement of the pace
PROBE = ("Answer in full sentences.", "Count from one to twenty in words.")

log = logging.getLogger(__name__)


class GenerativeAnswerer:
    def __init__(self, lm: CausalLM, settings: InferenceSettings, metrics: InferenceMetrics,
                 runner: GenerationRunner | None = None) -> None:
        s = self.settings = settings
        self.lm = lm
        runner = runner or GenerationRunner(lm)
        self.batcher: Batcher[Job, None] = Batcher(
            "generate", runner, BatchLimits(s.gen.token_budget, s.gen.max_batch),
            s.queue_capacity, observer=BatcherMetrics(metrics, "generate", s.gen.max_batch))
        runner.on_step = metrics.decode_rows.observe
        if s.gen.continuous:
            runner.admit, runner.max_rows = self.batcher.admit, s.gen.max_batch
        # The recent pace, for `auto` mode's estimate (the warm-up's figures until measured).
        self.pace = Pace(lm.warm_first_token_s, lm.warm_per_token_s)
        self._probe: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.batcher.start()

    async def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
        await self.batcher.stop()

    def recheck(self) -> asyncio.Task[None] | None:
        """`auto` quoted on the estimate: measure the pace again, with a short generation
        queued behind every query, unless one runs, work is queued (its answers measure
        it) or one was asked for within pace.RECHECK_S. The measurement, or None."""
        if self._probe is not None and not self._probe.done():
            return None
        if len(self.batcher.queue) or not self.pace.due(time.monotonic()):
            return None
        self._probe = asyncio.get_running_loop().create_task(self._measure())
        return self._probe

    async def _measure(self) -> None:
        prompt = self.lm.render(*PROBE)
        job = Job(prompt, PROBE_TOKENS, 0.0, ())
        tokens = self.lm.count_tokens(prompt) + PROBE_TOKENS
        try:
            request, _ = self.batcher.enqueue(job, 1, tokens, BULK)
        except QueueFullError:
            return  # queries filled the queue meanwhile: their answers measure the pace
        started, first = time.perf_counter(), None
        try:
            while not isinstance(event := await job.events.get(), Finished):
                if isinstance(event, BaseException):
                    log.warning("measuring the generator's pace failed: %s", event)
                    return  # the next generation reports it to its caller
                first = first or time.perf_counter()
        finally:
            job.cancelled = True
            self.batcher.cancel(request)
        self._observe(started, first, time.perf_counter(), event.completion_tokens)

    def max_new_tokens(self, params: QueryParams) -> int:
        s = params.settings(self.settings)  # the limits of the query's configuration
        return min(params.max_new_tokens or s.default_max_new_tokens, s.max_new_tokens_cap)

    def load(self, params: QueryParams) -> GeneratorLoad:
        """How busy the generator is and how long `params`' answer would take now."""
        waiting = len(self.batcher.queue)
        rows = self.settings.gen.max_batch
        estimate = self.pace.estimate(self.max_new_tokens(params))
        # Each full batch ahead runs about one answer's time before this one starts.
        return GeneratorLoad(overloaded=waiting >= rows,
                             estimate_s=estimate * (1 + waiting // rows), waiting=waiting)

    async def stream(self, params: QueryParams, texts: Sequence[str],
                     ) -> AsyncGenerator[str | Answer, None]:
        """The answer's text deltas, then the Answer itself as the last item."""
        started, s = time.perf_counter(), self.settings
        max_new = self.max_new_tokens(params)
        budget = min(s.prompt_token_budget, self.lm.prompt_room(max_new))
        prompt, shown = pack_prompt(params.question, list(texts), self.lm.count_tokens,
                                    budget, self.lm.render)
        job = Job(prompt, max_new, params.temperature, params.stop)
        request, _ = self.batcher.enqueue(job, 1, budget + max_new, INTERACTIVE)
        pieces: list[str] = []
        first: float | None = None
        try:
            while not isinstance(event := await job.events.get(), Finished):
                if isinstance(event, BaseException):
                    raise InfrastructureError(f"generation failed: {event}") from event
                if first is None:
                    first = time.perf_counter()
                pieces.append(event)
                yield event
        finally:
            job.cancelled = True  # a no-op once finished; frees the row if the caller left
            self.batcher.cancel(request)
        ended = time.perf_counter()
        self._observe(started, first, ended, event.completion_tokens)
        yield Answer(tuple(pieces), event.reason, event.prompt_tokens, event.completion_tokens,
                     (ended - started) * 1000, ANSWER_MODE, "tokens", shown)

    def _observe(self, started: float, first: float | None, ended: float, tokens: int) -> None:
        if first is None or tokens < 2:
            return
        self.pace.observe(first - started, (ended - first) / (tokens - 1))
