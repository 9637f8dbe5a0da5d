"""A query is one pipeline (services/inference/pipeline.py): the gRPC handlers convert and
call it, and the pipeline alone walks cache, search, mode, answer, store and bookkeeping."""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

from services.inference.cache.key import scope_of
from services.inference.cache.serve import CachedQueries, no_generation
from services.inference.engine import QueryEngine
from services.inference.pipeline import QueryPipeline
from services.inference.query import QueryParams
from services.inference.settings import InferenceSettings
from shared.contract.access import Access
from tests.unit.inference.fakes import FakeSearch, WordEncoder, hit

SERVER = Path(__file__).resolve().parents[3] / "services/inference/api/server.py"
# What only the pipeline does: the engine's answer and search paths, the answer cache.
PIPELINE_ONLY = {"answer", "answer_stream", "choose_mode", "retrieve", "store_answer",
                 "query", "record"}


def test_the_grpc_handlers_call_the_pipeline_and_nothing_of_its_steps() -> None:
    tree = ast.parse(SERVER.read_text())
    servicer = next(n for n in tree.body
                    if isinstance(n, ast.ClassDef) and n.name == "InferenceServicer")
    steps = sorted({f"{ast.unparse(c.func.value)}.{c.func.attr}" for c in ast.walk(servicer)
                    if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr in PIPELINE_ONLY
                    and not ast.unparse(c.func.value).startswith("self.pipeline")})
    assert steps == []


RESTRICTED = Access.of("u-1", ["sre"])


class Clock:
    def __init__(self, left: float | None = None) -> None:
        self.started, self._left = time.perf_counter(), left

    def remaining(self) -> float | None:
        return self._left

    def left(self) -> float | None:
        return self._left


def test_a_query_walks_the_pipeline_and_leaves_its_bookkeeping() -> None:
    calls: list[tuple[str, str, bool]] = []
    search = FakeSearch({0: [hit("c-1", 0.9, "The broker disk filled at noon.",
                                 doc_id="incident-7")]})

    async def go() -> tuple[QueryPipeline, str]:
        settings = InferenceSettings(answer_mode="extractive")
        engine = QueryEngine(settings, search, WordEncoder())
        await search.start()
        engine.start()
        try:
            pipeline = QueryPipeline(engine, CachedQueries(engine, no_generation),
                                     lambda m, s, v, n, failed: calls.append((m, v, failed)))
            params = QueryParams("when did the broker disk fill?", 3, None, None, None, None,
                                 0, 0.0, (), access=RESTRICTED)
            answered = await pipeline.query(params, Clock())
            return pipeline, answered.answer.text
        finally:
            await engine.stop()

    pipeline, text = asyncio.run(go())
    assert "noon" in text
    assert calls == [("Query", "", False)]  # timed once, for the variant that served it
    # a restricted caller's feedback may name what it was shown, and only that
    assert pipeline.served.shown(scope_of(RESTRICTED), "c-1")
    assert not pipeline.served.shown(scope_of(RESTRICTED), "c-2")
