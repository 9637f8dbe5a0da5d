"""The generative path with a tiny local model: batching, streaming, stops, limits, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from scripts.benchlib.tinylm import build_tiny_lm
from services.inference.answer.generative.decode import Finished, GenerationRunner, Job
from services.inference.answer.generative.model import CausalLM
from shared.batching.batcher import Batcher
from shared.batching.queue import INTERACTIVE, BatchLimits

PROMPTS = ["The broker disk filled up because", "Rotate the logs when",
           "Payments failed at noon since the certificate", "Why?"]


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CausalLM]:
    yield CausalLM(build_tiny_lm(tmp_path_factory.mktemp("tiny-lm")), device="cpu")


async def collect(job: Job, timeout_s: float = 60) -> tuple[list[str], Finished]:
    """A job's deltas up to its Finished; a job that never finishes fails after timeout_s."""
    deltas: list[str] = []
    async with asyncio.timeout(timeout_s):
        while not isinstance(event := await job.events.get(), Finished):
            assert isinstance(event, str), event
            deltas.append(event)
    return deltas, event


def run_jobs(lm: CausalLM, jobs: list[Job], runner: GenerationRunner | None = None,
             ) -> list[tuple[list[str], Finished]]:
    async def go() -> list[tuple[list[str], Finished]]:
        await (runner or GenerationRunner(lm))(jobs)
        return [await collect(j) for j in jobs]
    return asyncio.run(go())


def job(prompt: str, max_new: int = 12, stop: tuple[str, ...] = ()) -> Job:
    return Job(prompt, max_new, 0.0, stop)


def test_loads_in_fp32_on_cpu(lm: CausalLM) -> None:
    import torch

    assert lm.device.type == "cpu" and lm.dtype == torch.float32
    assert next(lm.model.parameters()).dtype == torch.float32


def test_batched_greedy_output_equals_one_at_a_time(lm: CausalLM) -> None:
    alone = [run_jobs(lm, [job(p)])[0] for p in PROMPTS]
    together = run_jobs(lm, [job(p) for p in PROMPTS])
    assert ["".join(d) for d, _ in together] == ["".join(d) for d, _ in alone]
    assert all("".join(d).strip() for d, _ in alone)  # random weights still say something
    assert [f.completion_tokens for _, f in together] == [12] * 4
    assert {f.reason for _, f in together} == {"length"}


def test_deltas_stream_in_order_and_join_to_the_decoded_text(lm: CausalLM) -> None:
    j = job(PROMPTS[0], max_new=10)
    deltas, done = run_jobs(lm, [j])[0]
    assert len(deltas) > 1  # streamed, not one lump at the end
    assert "".join(deltas) == lm.decode(j.ids) and done.completion_tokens == len(j.ids) == 10
    assert done.prompt_tokens == len(lm.tokenizer(PROMPTS[0])["input_ids"])


def test_stop_sequence_cuts_the_answer_before_it(lm: CausalLM) -> None:
    full = "".join(run_jobs(lm, [job(PROMPTS[1], max_new=20)])[0][0])
    words = full.split()
    stop = words[len(words) // 2]
    expected = full[: full.find(stop)]
    deltas, done = run_jobs(lm, [job(PROMPTS[1], max_new=20, stop=(stop,))])[0]
    assert "".join(deltas) == expected and done.reason == "stop"
    assert stop not in "".join(deltas)


def test_max_new_tokens_per_request_in_one_batch(lm: CausalLM) -> None:
    runner = GenerationRunner(lm)
    results = run_jobs(lm, [job(PROMPTS[0], 3), job(PROMPTS[1], 9)], runner)
    assert [f.completion_tokens for _, f in results] == [3, 9]
    # The short one's row left the batch: steps after its end compute one row only.
    assert runner.steps == [2, 2, 1, 1, 1, 1, 1, 1]


def test_cancelled_caller_frees_its_row_and_the_others_go_on(lm: CausalLM) -> None:
    async def go() -> tuple[GenerationRunner, Finished, tuple[list[str], Finished]]:
        runner = GenerationRunner(lm)
        leaving, staying = job(PROMPTS[0], 50), job(PROMPTS[1], 20)
        running = asyncio.create_task(runner([leaving, staying]))
        await leaving.events.get()  # its first delta arrived: it is decoding
        leaving.cancelled = True
        await running
        while not isinstance(last := leaving.events.get_nowait(), Finished):
            pass
        return runner, last, await collect(staying)
    runner, left, (_, stayed) = asyncio.run(go())
    assert left.reason == "cancelled" and left.completion_tokens < 50
    assert stayed.reason == "length" and stayed.completion_tokens == 20
    assert runner.steps[-1] == 1 and runner.steps[0] == 2


def test_scheduler_batches_concurrent_requests_into_one_generation(lm: CausalLM) -> None:
    async def go() -> list[int]:
        runner = GenerationRunner(lm)
        scheduler: Batcher[Job, None] = Batcher("generate", runner, BatchLimits(10_000, 8), 16)
        scheduler.start()
        jobs = [job(p, 4) for p in PROMPTS]
        for j in jobs:
            scheduler.enqueue(j, 1, 100, INTERACTIVE)
        results = [await collect(j) for j in jobs]
        await scheduler.stop()
        assert all(f.completion_tokens == 4 for _, f in results)
        return scheduler.batches
    assert asyncio.run(go()) == [4]


def test_stream_query_generates_with_citations_through_grpc(lm: CausalLM) -> None:
    from shared.rpc.streamrag.v1 import inference_pb2 as pb
    from tests.unit.inference.fakes import FakeSearch
    from tests.unit.inference.serving import CHUNKS, serving, stub

    async def go() -> tuple[list[pb.StreamQueryResponse], pb.InfoResponse, float]:
        async with serving(FakeSearch(CHUNKS)) as (runtime, channel):
            runtime.engine.attach_generator(lm)
            request = pb.QueryRequest(question="what freed the disk?", max_new_tokens=6)
            messages = [m async for m in stub(channel).StreamQuery(request)]
            steps = runtime.metrics.sample("streamrag_inference_decode_rows_count")
            return messages, await stub(channel).Info(pb.InfoRequest()), steps
    messages, info, steps = asyncio.run(go())
    assert steps == 5  # six tokens: the first from the prefill, five decode steps
    kinds = [m.WhichOneof("event") for m in messages]
    assert kinds[0] == "start" and kinds[-1] == "end" and set(kinds[1:-1]) == {"delta"}
    # The default mode, auto, generates when a model is loaded and nothing stands in the way.
    assert (messages[0].start.answer_mode, messages[0].start.answer_mode_reason) == (
        "generative", "fits")
    assert info.answer_mode == "auto"
    end = messages[-1].end
    assert (end.finish_reason, end.usage.completion_tokens, end.usage.unit) == (
        "length", 6, "tokens")
    assert end.usage.prompt_tokens > 20  # the packed sources are in the prompt


def test_deltas_survive_decoding_that_rewrites_earlier_text(lm: CausalLM) -> None:
    # With clean_up_tokenization_spaces, "it '" + "s" decodes to "it's": the whole-answer
    # text stops extending what was emitted. Every token must still reach the caller.
    lm.tokenizer.clean_up_tokenization_spaces = True
    try:
        tokens = lm.tokenizer("it ' s late today", add_special_tokens=False)["input_ids"]
        j = job("unused", max_new=len(tokens))
        runner = GenerationRunner(lm)
        finished = [runner._advance(j, t) for t in tokens]
        deltas = []
        while not isinstance(event := j.events.get_nowait(), Finished):
            deltas.append(event)
    finally:
        lm.tokenizer.clean_up_tokenization_spaces = False
    assert finished[-1] and not any(finished[:-1])
    assert (event.reason, event.completion_tokens) == ("length", 5)
    assert "".join(deltas).replace(" ", "") == "it'slatetoday"  # nothing lost after "'"
    assert "".join(deltas).endswith("late today")


def test_a_long_prompt_is_packed_to_fit_and_keeps_its_question(lm: CausalLM) -> None:
    from services.inference.answer.generative.prompt import pack_prompt

    sources = [f"Source {i} says the ledger export stalled because of lock contention "
               f"in shard {i} during the nightly batch window." * 3 for i in range(12)]
    room = lm.prompt_room(12)
    prompt, packed = pack_prompt("Why did the export stall?", sources, lm.count_tokens,
                                 min(1024, room))
    assert 0 < len(packed) < len(sources)  # the tiny model's 256 positions hold only some
    assert len(lm.tokenizer(prompt)["input_ids"]) + 12 <= lm.max_positions
    # Should a prompt still be too long, the start goes, not the question at the end.
    ids = lm.tokenizer(prompt * 3, truncation=True, max_length=40)["input_ids"]
    assert lm.tokenizer.decode(ids, skip_special_tokens=True).endswith("answer :")


def test_a_job_admitted_mid_generation_decodes_as_if_alone(lm: CausalLM) -> None:
    alone = run_jobs(lm, [job(PROMPTS[3], max_new=8)])[0]
    waiting = [job(PROMPTS[3], max_new=8)]

    def admit(room: int) -> list[Job]:
        # Joins after the first job's third step, much shorter: its side is left-padded.
        return [waiting.pop()] if waiting and len(runner.steps) == 3 and room else []
    runner = GenerationRunner(lm, admit=admit, max_rows=4)
    first = job(PROMPTS[2], max_new=20)
    late = waiting[0]
    [(first_deltas, first_done)] = run_jobs(lm, [first], runner)
    late_deltas, late_done = asyncio.run(collect(late))
    assert runner.joined == [1] and max(runner.steps) == 2  # two rows ran together
    assert "".join(late_deltas) == "".join(alone[0])  # the merged KV cache is exact
    assert late_done.completion_tokens == alone[1].completion_tokens == 8
    assert "".join(first_deltas) == "".join(run_jobs(lm, [job(PROMPTS[2], 20)])[0][0])
    assert first_done.completion_tokens == 20


def test_continuous_batching_starts_a_late_request_before_the_batch_ends(lm: CausalLM) -> None:
    async def go() -> tuple[list[str], int, list[int], list[int]]:
        runner = GenerationRunner(lm)
        scheduler: Batcher[Job, None] = Batcher("generate", runner, BatchLimits(10_000, 8), 16)
        runner.admit, runner.max_rows = scheduler.admit, 8
        scheduler.start()
        long, late = job(PROMPTS[0], 60), job(PROMPTS[1], 3)
        scheduler.enqueue(long, 1, 100, INTERACTIVE)
        first = await long.events.get()  # the long job is decoding
        scheduler.enqueue(late, 1, 100, INTERACTIVE)
        late_deltas, _ = await collect(late)
        long_so_far = 1 + long.events.qsize()  # its events out when the late one finished
        rest, _ = await collect(long)
        await scheduler.stop()
        return [first, *rest], long_so_far, scheduler.batches, runner.joined
    long_deltas, long_so_far, batches, joined = asyncio.run(go())
    # It did not wait for the long one to finish: the long job's Finished (and more) came
    # after the late one had finished.
    assert long_so_far < len(long_deltas) + 1
    assert batches == [1] and joined == [1]  # one batch; the late job joined it
    assert long_deltas  # and the long one went on to its end
