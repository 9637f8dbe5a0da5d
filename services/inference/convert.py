"""Between the engine's Python values and the Inference API's protobuf messages."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from services.inference.answer import ANSWER_MODE
from services.inference.engine import Answer, QueryEngine, Retrieval
from services.inference.params import QueryParams, parse_params
from services.inference.settings import InferenceSettings
from shared.records import SearchHit
from shared.rpc.streamrag.v1 import inference_pb2 as pb


def params(request: pb.QueryRequest, settings: InferenceSettings, now: float) -> QueryParams:
    return parse_params(
        settings, question=request.question, top_k=request.top_k, since=request.since,
        until=request.until, domain=request.domain, source=request.source,
        max_new_tokens=request.max_new_tokens, temperature=request.temperature,
        stop=tuple(request.stop), now=now,
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def citation(hit: SearchHit) -> pb.Citation:
    return pb.Citation(
        chunk_id=hit.chunk_id, doc_id=hit.doc_id, version=hit.version, score=hit.score,
        event_time=hit.event_time, event_time_iso=iso(hit.event_time), text=hit.text,
        title=hit.title, domain=hit.domain, source=hit.source,
    )


def _timings(retrieval: Retrieval, answer: Answer) -> pb.Timings:
    return pb.Timings(
        embed_ms=retrieval.embed_ms, retrieval_ms=retrieval.retrieval_ms,
        answer_ms=answer.answer_ms, total_ms=(time.perf_counter() - retrieval.started) * 1000,
    )


def _usage(answer: Answer) -> pb.Usage:
    return pb.Usage(prompt_tokens=answer.prompt_words,
                    completion_tokens=answer.completion_words, unit="words")


def query_response(retrieval: Retrieval, answer: Answer) -> pb.QueryResponse:
    result = retrieval.result
    return pb.QueryResponse(
        answer=answer.text, citations=[citation(h) for h in result.hits],
        answer_mode=ANSWER_MODE, partial=result.partial, missing_shards=result.unanswered,
        shard_errors=dict(result.errors), timings=_timings(retrieval, answer),
        finish_reason=answer.finish_reason, usage=_usage(answer),
    )


def stream_start(retrieval: Retrieval) -> pb.StreamQueryResponse:
    result = retrieval.result
    return pb.StreamQueryResponse(start=pb.StreamStart(
        citations=[citation(h) for h in result.hits], answer_mode=ANSWER_MODE,
        partial=result.partial, missing_shards=result.unanswered,
        shard_errors=dict(result.errors),
    ))


def stream_end(retrieval: Retrieval, answer: Answer) -> pb.StreamQueryResponse:
    return pb.StreamQueryResponse(end=pb.StreamEnd(
        finish_reason=answer.finish_reason, usage=_usage(answer),
        timings=_timings(retrieval, answer),
    ))


def info(engine: QueryEngine, shards: int) -> pb.InfoResponse:
    s, encoder = engine.settings, engine.encoder
    return pb.InfoResponse(
        model_id=encoder.model_id if encoder else "", dim=encoder.dim if encoder else 0,
        device=str(encoder.device) if encoder else s.device, answer_mode=ANSWER_MODE,
        shards=shards, ready=engine.ready,
        limits=pb.Limits(default_top_k=s.default_top_k, max_top_k=s.max_top_k,
                         max_question_chars=s.max_question_chars,
                         shard_timeout_s=s.shard_timeout_s,
                         answer_sentences=s.answer_sentences),
    )
