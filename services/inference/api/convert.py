"""Between the engine's Python values and the Inference API's protobuf messages."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from services.inference.answer import citations as citation_rules
from services.inference.answer.modes import ModeChoice
from services.inference.answer.result import Answer
from services.inference.engine import QueryEngine, Retrieval
from services.inference.query import QueryParams, parse_params
from services.inference.render import iso
from services.inference.settings import InferenceSettings
from services.inference.telemetry.latency import LatencyStats
from services.inference.telemetry.streamstats import WindowCounts
from shared.contract.query_config import BASE
from shared.contract.records import DriftReport, SearchHit
from shared.rpc.streamrag.v1 import inference_pb2 as pb


def params(request: pb.QueryRequest, settings: InferenceSettings, now: float) -> QueryParams:
    return parse_params(
        settings, question=request.question, top_k=request.top_k, since=request.since,
        until=request.until, domain=request.domain, source=request.source,
        max_new_tokens=request.max_new_tokens, temperature=request.temperature,
        stop=tuple(request.stop), answer_mode=request.answer_mode, now=now,
    )


def retrieve_params(request: pb.RetrieveRequest, settings: InferenceSettings,
                    now: float) -> QueryParams:
    """A Retrieve's filters checked exactly as a Query's; the answer's limits stay default."""
    return parse_params(
        settings, question=request.question, top_k=request.top_k, since=request.since,
        until=request.until, domain=request.domain, source=request.source, now=now,
    )


def citation(hit: SearchHit, rerank_score: float | None = None) -> pb.Citation:
    return pb.Citation(
        chunk_id=hit.chunk_id, doc_id=hit.doc_id, version=hit.version, score=hit.score,
        event_time=hit.event_time, event_time_iso=iso(hit.event_time), text=hit.text,
        title=hit.title, domain=hit.domain, source=hit.source, rerank_score=rerank_score,
    )


def citations(retrieval: Retrieval) -> list[pb.Citation]:
    """The retrieved hits in order, each with its rerank score when it has one."""
    hits, scores = retrieval.result.hits, retrieval.rerank_scores
    return [citation(h, scores[i] if i < len(scores) else None) for i, h in enumerate(hits)]


def _timings(retrieval: Retrieval, answer: Answer) -> pb.Timings:
    return pb.Timings(
        embed_ms=retrieval.embed_ms, retrieval_ms=retrieval.retrieval_ms,
        answer_ms=answer.answer_ms, total_ms=(time.perf_counter() - retrieval.started) * 1000,
        rerank_ms=retrieval.rerank_ms,
    )


def _usage(answer: Answer) -> pb.Usage:
    return pb.Usage(prompt_tokens=answer.prompt_tokens,
                    completion_tokens=answer.completion_tokens, unit=answer.unit)


def _checked(retrieval: Retrieval, answer: Answer) -> citation_rules.CitationCheck:
    if answer.citations is not None:
        return answer.citations
    hits = retrieval.result.hits
    return citation_rules.check_quoted(answer.text, [h.chunk_id for h in hits],
                                       [h.text for h in hits])


def citation_check(check: citation_rules.CitationCheck) -> pb.CitationCheck:
    return pb.CitationCheck(cited_by=check.cited_by, uncited=check.uncited,
                            unknown_markers=list(check.unknown_markers),
                            supported_share=check.supported_share)


def query_response(retrieval: Retrieval, answer: Answer, choice: ModeChoice | None = None,
                   ) -> pb.QueryResponse:
    result, check = retrieval.result, _checked(retrieval, answer)
    return pb.QueryResponse(
        answer=answer.text, citations=citations(retrieval),
        answer_mode=answer.mode, partial=result.partial, missing_shards=result.unanswered,
        shard_errors=dict(result.errors), timings=_timings(retrieval, answer),
        finish_reason=answer.finish_reason, usage=_usage(answer),
        cited_chunk_ids=list(check.cited_ids), citation_check=citation_check(check),
        answer_mode_reason=answer.replaced or (choice.reason if choice else ""),
        **served(retrieval),
    )


def served(retrieval: Retrieval) -> dict[str, Any]:
    """The configuration version and variant that served the call (config/live.py)."""
    s = retrieval.params.served
    return {"config_version": 0 if s is None else s.version,
            "variant": BASE if s is None else s.variant}


def retrieve_response(retrieval: Retrieval) -> pb.RetrieveResponse:
    result = retrieval.result
    total_ms = (time.perf_counter() - retrieval.started) * 1000
    return pb.RetrieveResponse(
        chunks=citations(retrieval), partial=result.partial,
        missing_shards=result.unanswered, shard_errors=dict(result.errors),
        timings=pb.Timings(embed_ms=retrieval.embed_ms, retrieval_ms=retrieval.retrieval_ms,
                           total_ms=total_ms, rerank_ms=retrieval.rerank_ms),
        **served(retrieval),
    )


def stream_start(retrieval: Retrieval, choice: ModeChoice) -> pb.StreamQueryResponse:
    result = retrieval.result
    return pb.StreamQueryResponse(start=pb.StreamStart(
        citations=citations(retrieval), answer_mode=choice.mode,
        partial=result.partial, missing_shards=result.unanswered,
        shard_errors=dict(result.errors), answer_mode_reason=choice.reason,
        **served(retrieval),
    ))


def stream_end(retrieval: Retrieval, answer: Answer) -> pb.StreamQueryResponse:
    check = _checked(retrieval, answer)
    return pb.StreamQueryResponse(end=pb.StreamEnd(
        finish_reason=answer.finish_reason, usage=_usage(answer),
        timings=_timings(retrieval, answer), cited_chunk_ids=list(check.cited_ids),
        citation_check=citation_check(check),
        answer_mode=answer.mode if answer.replaced else "", answer_mode_reason=answer.replaced,
    ))


def embed_response(engine: QueryEngine, vectors: np.ndarray) -> pb.EmbedResponse:
    assert engine.encoder is not None
    return pb.EmbedResponse(model_id=engine.encoder.model_id, dim=engine.encoder.dim,
                            vectors=[pb.Vector(values=row.tolist()) for row in vectors])


def info(engine: QueryEngine, shards: int,
         latency: Sequence[tuple[str, LatencyStats]] = (), config_version: int = 0,
         variants: Sequence[str] = (BASE,)) -> pb.InfoResponse:
    s, encoder, lm = engine.settings, engine.encoder, engine.lm
    scorer = engine.reranker.scorer if engine.reranker is not None else None
    return pb.InfoResponse(
        model_id=encoder.model_id if encoder else "", dim=encoder.dim if encoder else 0,
        device=str(encoder.device) if encoder else s.device, answer_mode=engine.answer_mode,
        shards=shards, ready=engine.ready,
        limits=pb.Limits(default_top_k=s.default_top_k, max_top_k=s.max_top_k,
                         max_question_chars=s.max_question_chars,
                         shard_timeout_s=s.shard_timeout_s,
                         answer_sentences=s.answer_sentences,
                         max_embed_texts=s.max_embed_texts, max_batch_size=s.embed.max_batch,
                         queue_capacity=s.queue_capacity,
                         max_new_tokens=s.max_new_tokens_cap),
        generator_model=lm.model_id if lm else engine.generator_name,
        generator_device=str(lm.device) if lm else "",
        reranker_model=scorer.model_id if scorer else "",
        reranker_device=str(scorer.device) if scorer else "",
        rerank_candidates=s.rerank.candidates if engine.reranker is not None else 0,
        latency=[pb.MethodLatency(method=m, count=s.count, p50_ms=s.p50_ms, p95_ms=s.p95_ms,
                                  p99_ms=s.p99_ms) for m, s in latency],
        config_version=config_version, variants=list(variants),
    )


def stats_response(window: Any, counts: WindowCounts) -> pb.StatsResponse:
    return pb.StatsResponse(
        window=window, window_start=counts.start, window_end=counts.end,
        counts=[pb.StatCount(source=r.source, domain=r.domain, kind=r.kind, count=r.count)
                for r in counts.rows],
        drift=[pb.DriftState(source=d.latest.source, domain=d.latest.domain,
                             model_id=d.latest.model_id, latest=drift_window(d.latest),
                             last_event=drift_window(d.last_event) if d.last_event else None)
               for d in counts.drift])


def drift_window(report: DriftReport) -> pb.DriftWindow:
    optional = {name: value for name in ("score", "z", "mean", "std")
                if (value := getattr(report, name)) is not None}
    return pb.DriftWindow(
        window_start=report.window_start, window_end=report.window_end, docs=report.docs,
        status=report.status, history=report.history, threshold=report.threshold,
        documents=[pb.DriftDocument(doc_id=d.doc_id, version=d.version, title=d.title,
                                    distance=d.distance) for d in report.documents],
        terms=list(report.terms), late=report.late, dropped=report.dropped,
        closed_at=report.at, **optional)
