"""Inference settings (env prefix STREAMRAG_INFERENCE_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from services.inference.rerank.folder import check_model_dir
from services.inference.search.fusion import Fusion
from shared.encoder.runtime import EncoderSettings, Runtime
from shared.settings import ServiceSettings


class InferenceSettings(ServiceSettings, EncoderSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_INFERENCE_", frozen=True)

    # Localhost only by default: set auth_token (and TLS) before listening more widely.
    grpc_host: str = "127.0.0.1"
    grpc_port: int = Field(default=50051, ge=0, le=65535)
    # TLS when both are set; plaintext otherwise.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Calls must send "authorization: Bearer <token>" when set (health checks are exempt).
    auth_token: SecretStr | None = None
    # Prometheus /metrics; 0 disables it (the default, so parallel meshes never collide).
    metrics_port: int = Field(default=0, ge=0, le=65535)
    default_top_k: int = Field(default=5, ge=1)
    max_top_k: int = Field(default=50, ge=1, le=1000)
    # How long a gather waits for the slowest shard before answering with what it has.
    shard_timeout_s: float = Field(default=2.0, gt=0)
    max_question_chars: int = Field(default=4000, ge=1)
    answer_sentences: int = Field(default=3, ge=1)
    max_embed_texts: int = Field(default=64, ge=1)
    # The query encoder (device, threads, graph cache: shared/encoder/runtime.py). ONNX
    # Runtime encodes a question 1.7x as fast as torch on CPU (scripts/bench_encoder);
    # CUDA devices and machines without onnxruntime run torch.
    encoder_runtime: Runtime = "onnx"
    # encoder_threads stays 0 (one per core): pinned to one thread, ONNX took 296 ms to
    # encode the questions of 8 clients against 29 ms with two (bench_query --retrieve
    # --onnx-threads 2); unlike torch, ONNX Runtime's second thread did not collapse under
    # load (scripts/bench_encoder).
    # The query encoder's model (model_path / model_id, shared/encoder/runtime.py) must be
    # the embedding model whose index the shards search. A model change: set next_model_path
    # and next_model_id to the new embedding deployment's; queries keep using the current
    # model until every shard's index of the next one has caught up (probed every
    # switch_check_s), then switch to it (services/inference/switch.py).
    next_model_path: Path | None = None
    next_model_id: str | None = None
    switch_check_s: float = Field(default=1.0, gt=0)
    # Seconds a stopping server lets in-flight calls finish.
    grace_s: float = Field(default=2.0, ge=0)

    # Query-encoder batches (shared/batching: cut whenever the encoder is free). A request
    # (one question, one answer's candidate sentences, or one Embed call) is one item;
    # max_batch counts requests, token_budget the batch's padded tokens (texts x longest).
    embed_max_batch: int = Field(default=16, ge=1)
    embed_token_budget: int = Field(default=16_384, ge=1)
    queue_capacity: int = Field(default=256, ge=1)  # per batcher; beyond: RESOURCE_EXHAUSTED
    # Questions released together by the encoder batcher share one search request per
    # shard, up to this many; 1 sends every question on its own.
    search_max_batch: int = Field(default=16, ge=1, le=256)
    # One-process mode: search the retrieval shards of this worker directly when it owns
    # them all (services/retrieval/local.py); False always goes through the broker.
    local_search: bool = True
    # Extractive answers: vectors of recently seen chunk sentences, so a popular chunk's
    # sentences are encoded once, not on every query that cites it (~1.6 KiB each; 0: off).
    sentence_cache_size: int = Field(default=50_000, ge=0)
    # Vectors of recently asked questions (lower-cased, spaces collapsed): a repeated
    # question skips the encoder (~1.6 KiB each; 0: off).
    question_cache_size: int = Field(default=4096, ge=0)
    # Of a cold answer's candidate sentences (up to 64), only this many, the best by BM25
    # with the question, are encoded and ranked by cosine (scripts/bench_answer measures
    # what that keeps of answer quality); 0 encodes them all.
    answer_shortlist: int = Field(default=8, ge=0)

    # Generator: a Hugging Face causal LM folder; None keeps the extractive answers.
    generator_path: Path | None = None
    gen_max_batch: int = Field(default=8, ge=1)
    # Padded tokens of a generation batch: rows x the longest (prompt + new tokens).
    gen_token_budget: int = Field(default=8192, ge=1)
    # Continuous batching: requests that arrive mid-generation join at the next step (up
    # to gen_max_batch rows) instead of waiting for the whole batch to finish.
    gen_continuous: bool = True
    prompt_token_budget: int = Field(default=1024, ge=16)
    default_max_new_tokens: int = Field(default=128, ge=1)
    max_new_tokens_cap: int = Field(default=512, ge=1)

    # Hybrid search: each shard also returns its BM25 top k for the question's words, and
    # the candidates are fused (services/inference/search/fusion.py): inner product plus
    # lexical_weight x BM25 / best BM25, or reciprocal rank fusion with rrf_k. Defaults chosen
    # by scripts/bench_quality on the tuning half of scifact-train (docs/benchmarks.md,
    # "Retrieval quality"); the fused score stays on the inner product's scale, which the feedback
    # boost below was set for.
    hybrid: bool = True
    fusion_method: Literal["rrf", "normalised"] = "normalised"
    rrf_k: int = Field(default=60, ge=1)
    dense_weight: float = Field(default=1.0, ge=0)
    lexical_weight: float = Field(default=0.1, ge=0)

    # Feedback: each net click (minus skips) in the last hour adds this to a chunk's score.
    feedback_weight: float = Field(default=0.02, ge=0)
    feedback_max_boost: float = Field(default=0.2, ge=0)

    # Stream statistics (stats.counts.v1): how long each window table keeps its windows,
    # and the hour windows' hop. Stats for an instant older than the retention: OUT_OF_RANGE.
    stats_minute_retention_s: float = Field(default=3600.0, ge=60)
    stats_hour_retention_s: float = Field(default=86_400.0, ge=3600)
    stats_hour_step_s: float = Field(default=300.0, ge=1, le=3600)

    # The query encoder on ONNX runs an int8 copy of its graph (shared/encoder/onnx.py):
    # 0.58x the CPU per question; SciFact nDCG@10 +0.0024 against fp32 question vectors
    # (scripts/bench_query --int8-quality). Chunk vectors stay fp32; torch ignores it.
    encoder_int8: bool = True

    def may_run_torch(self) -> bool:
        """The generator and the reranker always run torch; the query encoders (current
        and next model) as shared/encoder/runtime.py decides."""
        models = [self.model_path, *([self.next_model_path] if self.next_model_path else [])]
        return (self.generator_path is not None or self.reranker_path is not None
                or any(self.encoder_may_run_torch(m, self.encoder_int8) for m in models))

    def fusion(self) -> Fusion:
        return Fusion(self.fusion_method, self.rrf_k, self.dense_weight, self.lexical_weight)

    @model_validator(mode="after")
    def _next_model(self) -> InferenceSettings:
        if self.next_model_path is not None and not self.next_model_id:
            raise ValueError("STREAMRAG_INFERENCE_NEXT_MODEL_PATH needs its _NEXT_MODEL_ID")
        if self.next_model_id and self.next_model_id == self.encoder_model_id():
            raise ValueError("the next model id is the current one: nothing to switch to")
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> InferenceSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("set both STREAMRAG_INFERENCE_TLS_CERT and _TLS_KEY, or neither")
        return self

    # Reranking (services/inference/rerank/): a cross-encoder re-scores the first
    # rerank_candidates hits of every Query, StreamQuery and Retrieve and orders them by
    # its score before the cut to top_k (the search fetches at least that many). A Hugging
    # Face sequence-classification folder with one output, loaded offline on `device`;
    # None (the default) keeps the first stage's order. Its batches are cut like the
    # encoder's: one query is one request, bounded by rerank_max_batch queries and
    # rerank_token_budget padded tokens (pairs x the longest, each pair cut to
    # rerank_max_length tokens).
    reranker_path: Path | None = None
    rerank_candidates: int = Field(default=20, ge=1, le=1000)
    rerank_max_batch: int = Field(default=8, ge=1)
    rerank_token_budget: int = Field(default=16_384, ge=1)
    rerank_max_length: int = Field(default=256, ge=8, le=8192)

    @model_validator(mode="after")
    def _reranker_folder(self) -> InferenceSettings:
        if self.reranker_path is not None:
            check_model_dir(self.reranker_path)
        return self
