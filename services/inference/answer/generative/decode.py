"""Generation batched across concurrent requests and streamed: one job per request.

The batch runner prefills every job's prompt together, then decodes step by step; each
job gets its text deltas on its own queue as soon as its token is decoded. A job ends on
an end-of-sequence token, a stop sequence, its max_new_tokens, or its caller going away;
its row then leaves the batch, so the next steps compute only the live ones.

Continuous batching: between two steps the runner admits jobs that queued meanwhile (up
to `max_rows` live rows), prefills them and merges them into the running batch, so a
request arriving mid-generation starts at the next step instead of after the batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.inference.answer.generative.prompt import StopScanner

if TYPE_CHECKING:  # the model module imports torch: loaded only with a generator
    from services.inference.answer.generative.model import CausalLM, DecodeState


@dataclass(frozen=True)
class Finished:
    reason: str  # "stop", "length" or "cancelled"
    prompt_tokens: int
    completion_tokens: int


@dataclass(eq=False)
class Job:
    prompt: str
    max_new_tokens: int
    temperature: float
    stop: tuple[str, ...]
    events: asyncio.Queue[str | Finished | BaseException] = field(default_factory=asyncio.Queue)
    cancelled: bool = False  # set by the caller; the runner drops the row at the next step
    ids: list[int] = field(default_factory=list)
    # Incremental detokenization (as TGI and vLLM do it): the next delta is what decoding
    # ids[prefix_offset:] adds to decoding ids[prefix_offset:read_offset]. Decoding the
    # whole answer each step instead breaks when a later token rewrites earlier text
    # (clean_up_tokenization_spaces turns "it '" + "s" into "it's").
    prefix_offset: int = 0
    read_offset: int = 0
    prompt_tokens: int = 0

    def __post_init__(self) -> None:
        self.scanner = StopScanner(self.stop)


class GenerationRunner:
    """The batch function the generation Batcher (shared.batching) calls with its jobs."""

    def __init__(self, lm: CausalLM, seed: int | None = None,
                 admit: Callable[[int], list[Job]] | None = None, max_rows: int = 8) -> None:
        """`admit(n)` returns up to n queued jobs to join the running batch (None: never)."""
        self.lm, self.seed = lm, seed
        self.admit, self.max_rows = admit, max_rows
        self.steps: list[int] = []  # rows computed per decode step (tests, metrics)
        self.joined: list[int] = []  # jobs admitted into a running batch, per admission
        self.on_step: Callable[[int], None] = lambda rows: None  # metrics hook
        self._members: list[Job] = []  # every job of the run in progress, admitted ones too

    async def __call__(self, jobs: Sequence[Job]) -> list[None]:
        self._members = list(jobs)
        try:
            await self._run(list(jobs))
        except Exception as exc:  # every waiting caller hears of it, not just the log
            for job in self._members:
                job.events.put_nowait(exc)
        return [None] * len(jobs)

    async def _run(self, jobs: list[Job]) -> None:
        live, state = await self._join(jobs, [], None)
        while live:
            assert state is not None
            from services.inference.answer.generative.model import choose

            tokens = choose(state.logits, [j.temperature for j in live], self.seed)
            keep = [row for row, (job, token) in enumerate(zip(live, tokens, strict=True))
                    if not self._advance(job, token)]
            if not keep:
                live, state = [], None
            elif len(keep) < len(live):
                state = self.lm.keep_rows(state, keep)
                live, tokens = [live[r] for r in keep], [tokens[r] for r in keep]
            if state is not None:
                self.steps.append(len(live))
                self.on_step(len(live))
                state = await asyncio.to_thread(self._step, state, tokens)
            room = self.max_rows - len(live)
            if self.admit is not None and room > 0 and (newcomers := self.admit(room)):
                self.joined.append(len(newcomers))
                live, state = await self._join(newcomers, live, state)

    async def _join(self, jobs: list[Job], live: list[Job], state: DecodeState | None,
                    ) -> tuple[list[Job], DecodeState | None]:
        """Prefill `jobs` (the cancelled ones finish at once) and add them to the batch."""
        if live:  # newcomers: a failure from here on is theirs to hear of too
            self._members.extend(jobs)
        fresh = [j for j in jobs if not j.cancelled]
        for job in jobs:
            if job.cancelled:
                job.events.put_nowait(Finished("cancelled", 0, 0))
        if not fresh:
            return live, state
        room = max(j.max_new_tokens for j in fresh)
        added = await asyncio.to_thread(self.lm.prefill, [j.prompt for j in fresh], room)
        for job, n in zip(fresh, added.mask.sum(dim=1).tolist(), strict=True):
            job.prompt_tokens = int(n)
        if state is None:
            return fresh, added
        return live + fresh, self.lm.merge(state, added)

    def _step(self, state: DecodeState, tokens: list[int]) -> DecodeState:
        import torch

        return self.lm.step(state, torch.tensor(tokens, dtype=torch.long))

    def _advance(self, job: Job, token: int) -> bool:
        """Take one sampled token for `job`; True when the job has finished."""
        if job.cancelled:
            return self._finish(job, "cancelled")
        if token in self.lm.eos_ids:
            return self._finish(job, "stop")
        job.ids.append(token)
        before = self.lm.decode(job.ids[job.prefix_offset:job.read_offset])
        text = self.lm.decode(job.ids[job.prefix_offset:])
        # Emit once the text grew and does not end in a half-decoded character.
        if len(text) > len(before) and not text.endswith("\ufffd"):
            job.prefix_offset, job.read_offset = job.read_offset, len(job.ids)
            delta = job.scanner.feed(text[len(before):])
            if delta:
                job.events.put_nowait(delta)
            if job.scanner.stopped:
                return self._finish(job, "stop")
        if len(job.ids) >= job.max_new_tokens:
            return self._finish(job, "length")
        return False

    def _finish(self, job: Job, reason: str) -> bool:
        rest = job.scanner.flush()
        if rest:
            job.events.put_nowait(rest)
        job.events.put_nowait(Finished(reason, job.prompt_tokens, len(job.ids)))
        return True
