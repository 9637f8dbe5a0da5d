"""Prometheus metrics of the inference service, on their own registry and /metrics port."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

_LATENCY_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_SIZE = (1, 2, 4, 8, 16, 32, 64)
_FILL = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
_TOKENS = (64, 256, 1024, 4096, 16384, 65536)


@dataclass
class InferenceMetrics:
    # Own registry, not the process default: several runtimes in one test process must
    # not collide on metric names.
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r, b = self.registry, ["batcher"]
        self.queue_size = Gauge("streamrag_inference_queue_size",
                                "Requests waiting in a batcher", b, registry=r)
        self.batch_size = Histogram("streamrag_inference_batch_size",
                                    "Requests per batch", b, buckets=_SIZE, registry=r)
        self.batch_fill = Histogram("streamrag_inference_batch_fill",
                                    "Batch size over max batch size", b, buckets=_FILL,
                                    registry=r)
        self.queue_time = Histogram("streamrag_inference_queue_seconds",
                                    "Time from enqueue to batch start", b, buckets=_LATENCY_S,
                                    registry=r)
        self.batch_time = Histogram("streamrag_inference_batch_seconds",
                                    "Time to run one batch", b, buckets=_LATENCY_S, registry=r)
        self.batch_tokens = Histogram("streamrag_inference_batch_padded_tokens",
                                      "Padded tokens per batch (rows x the longest)", b,
                                      buckets=_TOKENS, registry=r)
        self.ttft = Histogram("streamrag_inference_time_to_first_token_seconds",
                              "Call start to the first answer delta", buckets=_LATENCY_S,
                              registry=r)
        self.inter_token = Histogram("streamrag_inference_inter_token_seconds",
                                     "Gap between answer deltas", buckets=_LATENCY_S, registry=r)
        self.latency = Histogram("streamrag_inference_request_seconds",
                                 "End-to-end call latency", ["method"], buckets=_LATENCY_S,
                                 registry=r)
        self.searches = Counter("streamrag_inference_searches_total",
                                "Shard searches by path: local (this process's shards) or "
                                "broker", ["path"], registry=r)
        self.decode_rows = Histogram("streamrag_inference_decode_rows",
                                     "Requests decoded together per generation step "
                                     "(continuous batching included)", buckets=_SIZE,
                                     registry=r)
        self.cache = Counter("streamrag_inference_sentence_cache_total",
                             "Answer sentences found in (hit) or encoded for (miss) the cache",
                             ["result"], registry=r)
        self.question_cache = Counter(
            "streamrag_inference_question_cache_total",
            "Question vectors found in (hit) or encoded for (miss) the caller scope's cache",
            ["result"], registry=r)
        self.unrenderable = Counter("streamrag_inference_unrenderable_total",
                                    "Stored fields of retrieved hits that could not be "
                                    "rendered (event time out of range, invalid text): "
                                    "returned empty", ["field"], registry=r)
        self.failures = Counter("streamrag_inference_failures_total",
                                "Failed calls by reason", ["method", "reason"], registry=r)
        self.answer_modes = Counter("streamrag_inference_answer_modes_total",
                                    "Answer paths taken, by why (requested, default, fits, "
                                    "no_generator, overload, deadline)", ["mode", "reason"],
                                    registry=r)
        self.answers_cited = Counter("streamrag_inference_answers_cited_total",
                                     "Answers by how their citations were found: quoted, "
                                     "model (its [n] markers), overlap (attributed), none",
                                     ["mode", "cited_by"], registry=r)
        self.citation_flags = Counter("streamrag_inference_citation_flags_total",
                                      "Answers flagged: uncited (passages given, none named) "
                                      "or unknown_marker (an [n] naming no passage shown)",
                                      ["mode", "flag"], registry=r)
        self.answer_support = Histogram("streamrag_inference_answer_supported_share",
                                        "Share of an answer's sentences grounded in a cited "
                                        "chunk (word overlap, answer/citations.py)", ["mode"],
                                        buckets=(0.0, 0.25, 0.5, 0.75, 0.999, 1.0), registry=r)

        self.answer_cache = Counter("streamrag_inference_answer_cache_total",
                                    "Answer cache lookups by outcome: hit (served unsearched), "
                                    "revalidated (searched, same hits), miss, expired, "
                                    "invalidated (the index changed the hits)",
                                    ["call", "outcome"], registry=r)
        self.answer_cache_entries = Gauge("streamrag_inference_answer_cache_entries",
                                          "Answers and retrievals kept in the answer cache",
                                          registry=r)
        self.answer_cache_latency = Histogram("streamrag_inference_answer_cache_seconds",
                                              "Call latency by answer cache outcome (off: "
                                              "cache disabled)", ["method", "outcome"],
                                              buckets=_LATENCY_S, registry=r)
        # Variant names are bounded by the configuration (at most 8 per version).
        self.variant_latency = Histogram("streamrag_inference_variant_request_seconds",
                                         "Query, StreamQuery and Retrieve latency by the "
                                         "configuration variant that served the call",
                                         ["method", "variant"], buckets=_LATENCY_S, registry=r)
        self.config_version = Gauge("streamrag_inference_config_version",
                                    "The query configuration version applied (0: none)",
                                    registry=r)
        self.config_refused = Counter("streamrag_inference_config_refused_total",
                                      "Query configuration records refused, never applied",
                                      ["reason"], registry=r)
        self.guard_breaches = Gauge("streamrag_inference_guard_breaches",
                                    "The SLO guard's consecutive breaking windows per variant "
                                    "(on the instance that runs the guard)", ["variant"],
                                    registry=r)
        self.guard_actions = Counter("streamrag_inference_guard_actions_total",
                                     "SLO guard actions: 1 stop routing, 2 roll back",
                                     ["tier"], registry=r)
        self.guard_windows = Counter("streamrag_inference_guard_windows_total",
                                     "Windows the SLO guard has judged", registry=r)
        self.auth_failures = Counter("streamrag_inference_auth_failures_total",
                                     "Calls refused UNAUTHENTICATED, by reason", ["reason"],
                                     registry=r)
        self.auth_ignored_groups = Counter(
            "streamrag_inference_auth_ignored_groups_total",
            "Groups in verified tokens dropped: not a label name, or a user: label",
            registry=r)

    def serve(self, host: str, port: int) -> None:
        """Expose /metrics on host:port (a daemon thread; it ends with the process)."""
        start_http_server(port, addr=host, registry=self.registry)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        """One sample's value (tests, Info): 0.0 when it was never set."""
        value = self.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value


@dataclass
class BatcherMetrics:
    """A shared.batching BatchObserver writing one batcher's figures to InferenceMetrics."""

    metrics: InferenceMetrics
    name: str
    max_requests: int

    def queued(self, size: int) -> None:
        self.metrics.queue_size.labels(batcher=self.name).set(size)

    def started(self, waits: Sequence[float]) -> None:
        for wait in waits:
            self.metrics.queue_time.labels(batcher=self.name).observe(wait)

    def finished(self, requests: int, padded_tokens: int, seconds: float) -> None:
        m, label = self.metrics, {"batcher": self.name}
        m.batch_size.labels(**label).observe(requests)
        m.batch_fill.labels(**label).observe(requests / self.max_requests)
        m.batch_tokens.labels(**label).observe(padded_tokens)
        m.batch_time.labels(**label).observe(seconds)
