"""A real OTLP/gRPC trace receiver in this process: what a collector would get (the
observability tests and bench_latency --tracing).

Services export with the OpenTelemetry SDK's OTLP exporter (STREAMRAG_TRACING_EXPORTER=otlp)
to `endpoint`; `spans()` flattens what arrived into plain dicts to assert on.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...]  # (trace id, span id)
    status_code: int
    events: tuple[str, ...] = field(default=())


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the proto's name
        got = []
        for rs in request.resource_spans:
            res = {a.key: _value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(Span(
                        service=str(res.get("service.name", "")), name=s.name,
                        trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(), kind=s.kind,
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links),
                        status_code=s.status.code,
                        events=tuple(e.name for e in s.events)))
        with self.receiver.lock:
            self.receiver.received.extend(got)
        return trace_service_pb2.ExportTraceServiceResponse()


class Receiver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[Span] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Receiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(grace=None)

    def spans(self, trace_id: str | None = None) -> list[Span]:
        with self.lock:
            return [s for s in self.received if trace_id is None or s.trace_id == trace_id]
