"""A configuration applied at run time reaches the next call: its top_k, its variant and
version on the response, a fresh answer-cache key, and the per-variant metrics."""

from __future__ import annotations

import asyncio
import json

from services.inference.runtime import InferenceRuntime
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch
from tests.unit.inference.serving import CHUNKS, serving, stub


def record(version: int, knobs: dict[str, object], variants: dict[str, object] | None = None,
           ) -> bytes:
    return json.dumps({"version": version, "author": "t", "at": 0.0, "knobs": knobs,
                       "variants": variants or {}}).encode()


def test_a_new_version_changes_the_next_query_and_the_cache_key() -> None:
    async def go() -> tuple[list[tuple[int, str, int]], list[str], InferenceRuntime]:
        out, keys = [], []
        async with serving(FakeSearch(CHUNKS), default_top_k=1) as (runtime, channel):
            for raw in (None, record(1, {"default_top_k": 2}), record(1, {"default_top_k": 3}),
                        b'{"version": 2, "knobs": {"default_top_k": 99999}}'):
                if raw is not None:
                    runtime.live.offer(raw)
                keys.append(runtime.cache.config_version)
                r = await stub(channel).Query(pb.QueryRequest(question="disk usage broker"))
                out.append((len(r.citations), r.variant, r.config_version))
            runtime.live.offer(record(2, {"default_top_k": 2}, {"stable": {"weight": 1}, "canary": {
                "weight": 1, "overrides": {"default_top_k": 1}}}))
            for i in range(12):
                r = await stub(channel).Retrieve(pb.RetrieveRequest(
                    question="disk usage broker", client_id=f"c{i}"))
                assert (len(r.chunks), r.config_version) == (
                    (1, 2) if r.variant == "canary" else (2, 2))
            return out, keys, runtime
    out, keys, runtime = asyncio.run(go())
    # Settings alone, then version 1; the stale version 1 and the bad version 2 are refused.
    assert out == [(1, "base", 0), (2, "base", 1), (2, "base", 1), (2, "base", 1)]
    assert keys[0] != keys[1] == keys[2] == keys[3]
    m = runtime.metrics
    assert m.sample("streamrag_inference_config_version") == 2
    assert m.sample("streamrag_inference_config_refused_total",
                    {"reason": "stale_version"}) == 1
    assert m.sample("streamrag_inference_config_refused_total",
                    {"reason": "invalid_field"}) == 1
    counts = {v: m.sample("streamrag_inference_variant_request_seconds_count",
                          {"method": "Retrieve", "variant": v}) or 0 for v in ("stable", "canary")}
    assert counts["stable"] + counts["canary"] == 12 and min(counts.values()) > 0
