"""A generator loaded on demand: where auto would quote anyway (a CPU under the default
latency objective) the process holds no model until a call asks for a generated answer;
auto quotes meanwhile, saying why, and concurrent generative calls load it once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.inference.answer import modes
from services.inference.answer.modes import ModeChoice
from services.inference.engine import QueryEngine
from services.inference.query import QueryParams
from services.inference.settings import InferenceSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import TAMARIN_CHUNKS, FakeSearch, ScriptedGenerator
from tests.unit.inference.serving import serving, stub


@pytest.mark.parametrize(("kw", "on_demand"), [
    ({"device": "cpu"}, True),  # the defaults on a CPU: auto would quote
    ({"device": "cpu", "auto_latency_objective_ms": 0}, False),  # generation wanted on CPU
    ({"device": "cpu", "auto_latency_objective_ms": 5000}, False),
    ({"device": "cuda"}, False),  # a GPU generates: loaded at start
    ({"device": "cuda", "generator_load": "on_demand"}, True),
    ({"device": "cpu", "generator_load": "eager"}, False),
])
def test_when_the_generator_loads(kw: dict[str, Any], on_demand: bool) -> None:
    assert InferenceSettings(**kw).generator_on_demand() is on_demand


def _params(mode: str) -> QueryParams:
    return QueryParams("q", 5, None, None, None, None, 0, 0.0, (), answer_mode=mode)


def test_auto_quotes_and_only_a_call_asking_for_generation_loads_it_once() -> None:
    engine = QueryEngine(InferenceSettings(), FakeSearch({}))
    loads = []

    class Lm:
        model_id, device = "tiny", "cpu"

    async def load() -> Any:
        loads.append(1)
        await asyncio.sleep(0.05)  # a slow load: concurrent callers wait for the one
        return Lm()

    def attach(lm: Any, runner: Any = None) -> None:
        engine.generative = ScriptedGenerator("Tamarin keeps cached pages for 35 days.")

    engine.attach_generator = attach  # type: ignore[method-assign]
    engine.defer_generator(load, "SmolLM2-135M-Instruct.Q4_1")
    assert engine.answer_mode == "auto"  # the configured default, not "extractive"
    assert engine.choose_mode(_params(""), None) == ModeChoice(
        modes.EXTRACTIVE, "latency_objective")

    async def go() -> None:
        await engine.ready_generator(_params("auto"))
        await engine.ready_generator(_params("extractive"))
        assert loads == [] and engine.generative is None
        await asyncio.gather(*(engine.ready_generator(_params("generative"))
                               for _ in range(3)))
    asyncio.run(go())
    assert loads == [1] and engine.generative is not None
    assert engine.choose_mode(_params("generative"), None).mode == modes.GENERATIVE


def test_the_runtime_defers_the_load_and_info_names_the_model(tmp_path: Path) -> None:
    gguf = tmp_path / "Tiny-Model.Q4_1.gguf"
    gguf.write_bytes(b"not loaded")
    called = []

    def factory() -> Any:
        called.append(1)
        raise AssertionError("the generator must not load for these calls")

    async def go() -> tuple[pb.InfoResponse, pb.QueryResponse]:
        async with serving(FakeSearch(TAMARIN_CHUNKS), generator_path=gguf,
                           generator_load="on_demand",
                           runtime_kw={"generator_factory": factory}) as (_, channel):
            info = await stub(channel).Info(pb.InfoRequest())
            quoted = await stub(channel).Query(pb.QueryRequest(
                question="how long does Tamarin keep cached pages?"))
            return info, quoted
    info, quoted = asyncio.run(go())
    assert called == []
    assert (info.generator_model, info.generator_device, info.answer_mode) == (
        "Tiny-Model.Q4_1", "", "auto")
    assert (quoted.answer_mode, quoted.answer_mode_reason) == ("extractive",
                                                                "latency_objective")
    assert "35 days" in quoted.answer
