"""The MCP tools over the Inference API: search, ask and status, shared by both MCP faces.

A tool only converts: its arguments into the proto request, the reply into a typed result.
Who answers is an `InferenceCalls`: inside the service, the gRPC servicer itself
(services/inference/api/mcp.py, so auth, access labels, limits, deadlines, the answer cache
and the query audit are the servicer's); in `streamrag mcp`, a running mesh's gRPC API.
Arguments are not range-checked here (top_k, question length): the servicer checks them, and
its refusal comes back as a tool error carrying the same status, reason and field gRPC sends
("streamrag-reason", "streamrag-field").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, TypeVar

from google.protobuf.message import Message
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from shared.errors import StreamragError
from shared.rpc.streamrag.v1 import inference_pb2 as pb

M = TypeVar("M", bound=Message)
STATS_WINDOW = pb.STATS_WINDOW_MINUTE  # status's counts: the current minute's window


@dataclass(frozen=True)
class Caller:
    """What the transport says of a tool call: its HTTP headers (None on stdio) and peer."""

    headers: Mapping[str, str] | None = None
    peer: str = ""


class CallFailedError(StreamragError):
    """A call answered with a status other than OK: gRPC's code name, its details and,
    where gRPC sends them, the reason and field of its trailing metadata."""

    def __init__(self, status: str, message: str, reason: str = "", field: str = "") -> None:
        self.status, self.message, self.reason, self.field = status, message, reason, field
        super().__init__(f"{status}: {message}")


class InferenceCalls(Protocol):
    """One Inference method called with one request for one caller; a failure raises
    CallFailedError."""

    async def __call__(self, method: str, request: M, caller: Caller) -> Message: ...


class Chunk(BaseModel):
    """One retrieved chunk (redacted text), as Retrieve and Query return it."""

    chunk_id: str
    doc_id: str
    version: int = Field(description="the document's version this chunk is of")
    source: str
    domain: str
    title: str
    event_time: str = Field(description="the document's event time, ISO 8601 in UTC")
    score: float = Field(description="the search's score, higher is better")
    text: str = Field(description="the chunk's text, PII redacted")


class SearchResult(BaseModel):
    chunks: list[Chunk] = Field(description="best first")
    partial: bool = Field(description="some index shards did not answer in time")
    missing_shards: list[int]
    config_version: int
    variant: str


class Answer(BaseModel):
    answer: str = Field(description='cites its sources as "[n]", n a 1-based place in citations')
    citations: list[Chunk]
    cited_chunk_ids: list[str] = Field(description="the chunks the answer cites, first first")
    answer_mode: str = Field(description='"extractive" (quoted) or "generative" (written)')
    answer_mode_reason: str = Field(
        description='why this mode: "requested", "default", "fits", or a fallback reason')
    finish_reason: str
    partial: bool
    config_version: int
    variant: str


class MethodLatency(BaseModel):
    method: str
    count: int
    p50_ms: float
    p99_ms: float


class StatCount(BaseModel):
    source: str
    domain: str
    kind: str = Field(description="received, new, updated, deleted, dead_lettered.<reason> ...")
    count: int


class Status(BaseModel):
    ready: bool = Field(description="false while the encoder warms up")
    model_id: str
    answer_mode: str = Field(description="of a question that names none")
    shards: int
    default_top_k: int
    max_top_k: int
    max_question_chars: int
    config_version: int
    variants: list[str]
    latency: list[MethodLatency] = Field(description="calls in the current minute")
    window_start: float | None = Field(description="the stream counts' minute (epoch seconds)")
    counts: list[StatCount] = Field(description="documents in the current minute, by kind")
    counts_refused: str = Field(
        description="why counts are empty where Stats refused them (its reason), else empty")


def chunk(c: pb.Citation) -> Chunk:
    return Chunk(chunk_id=c.chunk_id, doc_id=c.doc_id, version=c.version, source=c.source,
                 domain=c.domain, title=c.title, event_time=c.event_time_iso, score=c.score,
                 text=c.text)


def search_result(reply: pb.RetrieveResponse) -> SearchResult:
    return SearchResult(chunks=[chunk(c) for c in reply.chunks], partial=reply.partial,
                        missing_shards=list(reply.missing_shards),
                        config_version=reply.config_version, variant=reply.variant)


def answer(reply: pb.QueryResponse) -> Answer:
    return Answer(answer=reply.answer, citations=[chunk(c) for c in reply.citations],
                  cited_chunk_ids=list(reply.cited_chunk_ids), answer_mode=reply.answer_mode,
                  answer_mode_reason=reply.answer_mode_reason,
                  finish_reason=reply.finish_reason, partial=reply.partial,
                  config_version=reply.config_version, variant=reply.variant)


def health(info: pb.InfoResponse, stats: pb.StatsResponse | None, refused: str) -> Status:
    return Status(
        ready=info.ready, model_id=info.model_id, answer_mode=info.answer_mode,
        shards=info.shards, default_top_k=info.limits.default_top_k,
        max_top_k=info.limits.max_top_k, max_question_chars=info.limits.max_question_chars,
        config_version=info.config_version, variants=list(info.variants),
        latency=[MethodLatency(method=m.method, count=m.count, p50_ms=m.p50_ms,
                               p99_ms=m.p99_ms) for m in info.latency],
        window_start=stats.window_start if stats is not None else None,
        counts=[] if stats is None else [
            StatCount(source=c.source, domain=c.domain, kind=c.kind, count=c.count)
            for c in stats.counts],
        counts_refused=refused)


def ok(result: BaseModel) -> CallToolResult:
    """A tool's result: structured (its output schema) and the same JSON as text, for
    clients that read only text."""
    return CallToolResult(content=[TextContent(type="text", text=result.model_dump_json())],
                          structured_content=result.model_dump(mode="json"))


def tool_error(exc: CallFailedError) -> CallToolResult:
    """An MCP tool error: its text says status and reason; its structured content holds
    them as gRPC's status and trailing metadata do (names as the HTTP face's error body)."""
    error: dict[str, Any] = {"status": exc.status, "message": exc.message}
    error.update((k, v) for k, v in (("reason", exc.reason), ("field", exc.field)) if v)
    return CallToolResult(content=[TextContent(type="text", text=str(exc))],
                          structured_content={"error": error}, is_error=True)


def caller_of(ctx: Context[Any]) -> Caller:
    """The call's headers and peer where it came over HTTP (a Starlette request)."""
    request = ctx.request_context.request
    client = getattr(request, "client", None)
    peer = f"ipv4:{client.host}:{client.port}" if client else ""
    return Caller(ctx.headers, peer)


Question = Annotated[str, Field(description="the question, in plain words")]
TopK = Annotated[int, Field(description="chunks to return; 0: the server's default "
                                        "(status: default_top_k, at most max_top_k)")]
Domain = Annotated[str, Field(description="only chunks of this domain; empty: any")]
Source = Annotated[str, Field(description="only chunks of this source; empty: any")]
Since = Annotated[str, Field(description='event time from: "30m", "24h", "7d" ago, or ISO '
                                         '8601 with a zone; empty: unbounded')]
Until = Annotated[str, Field(description="event time up to, same forms as since")]
Mode = Annotated[str, Field(description='"extractive", "generative", "auto", or empty: '
                                        "the server's default")]


def server(calls: InferenceCalls, name: str = "streamrag") -> MCPServer:
    """An MCP server whose tools call `calls`."""
    mcp: MCPServer = MCPServer(name, instructions=(
        "Search and ask over a streaming document index: search returns ranked redacted "
        "chunks, ask a cited answer, status the index's health and freshness."))

    @mcp.tool()
    async def search(ctx: Context[Any], question: Question, top_k: TopK = 0,
                     domain: Domain = "", source: Source = "", since: Since = "",
                     until: Until = "") -> Annotated[CallToolResult, SearchResult]:
        """The indexed chunks most relevant to a question, best first (Retrieve)."""
        request = pb.RetrieveRequest(question=question, top_k=top_k, domain=domain,
                                     source=source, since=since, until=until)
        try:
            reply = await calls("Retrieve", request, caller_of(ctx))
        except CallFailedError as exc:
            return tool_error(exc)
        assert isinstance(reply, pb.RetrieveResponse)
        return ok(search_result(reply))

    @mcp.tool()
    async def ask(ctx: Context[Any], question: Question, top_k: TopK = 0,
                  domain: Domain = "", source: Source = "", since: Since = "",
                  until: Until = "", answer_mode: Mode = "") -> Annotated[CallToolResult, Answer]:
        """An answer to a question with the chunks it cites (Query)."""
        request = pb.QueryRequest(question=question, top_k=top_k, domain=domain,
                                  source=source, since=since, until=until,
                                  answer_mode=answer_mode)
        try:
            reply = await calls("Query", request, caller_of(ctx))
        except CallFailedError as exc:
            return tool_error(exc)
        assert isinstance(reply, pb.QueryResponse)
        return ok(answer(reply))

    @mcp.tool()
    async def status(ctx: Context[Any]) -> Annotated[CallToolResult, Status]:
        """Health and freshness: readiness, model, limits, recent latency and the current
        minute's document counts (Info and Stats; counts need a caller that reads all)."""
        caller = caller_of(ctx)
        try:
            info = await calls("Info", pb.InfoRequest(), caller)
        except CallFailedError as exc:
            return tool_error(exc)
        stats, refused = None, ""
        try:
            stats = await calls("Stats", pb.StatsRequest(window=STATS_WINDOW), caller)
        except CallFailedError as exc:
            refused = exc.reason or exc.status
        assert isinstance(info, pb.InfoResponse)
        assert stats is None or isinstance(stats, pb.StatsResponse)
        return ok(health(info, stats, refused))

    return mcp

