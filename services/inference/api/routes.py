"""The HTTP API's paths: which Inference method each one serves, its messages read from the
proto's service descriptor (so a changed proto changes the HTTP face and its OpenAPI
document with it; only the paths and summaries are written here)."""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import message_factory
from google.protobuf.message import Message

from shared.rpc.streamrag.v1 import inference_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Inference"]
# Method -> (path, summary). Embed is gRPC only: bulk vectors are not an HTTP client's task.
PATHS = {
    "Query": ("/v1/query", "One answer with its citations"),
    "StreamQuery": ("/v1/query:stream",
                    "The same answer as server-sent events: start, deltas, end"),
    "Retrieve": ("/v1/retrieve", "The ranked chunks alone, no answer"),
    "Info": ("/v1/info", "The model, device, limits and answer mode served"),
    "Feedback": ("/v1/feedback", "A cited chunk was clicked or skipped"),
    "Stats": ("/v1/stats", "Stream statistics and drift (callers that read everything)"),
}


@dataclass(frozen=True)
class Route:
    path: str
    method: str  # the Inference RPC it calls
    summary: str
    request: type[Message]
    response: type[Message]
    streams: bool  # the reply is server-sent events, one per streamed message


def routes() -> tuple[Route, ...]:
    found = []
    for name, (path, summary) in PATHS.items():
        method = SERVICE.methods_by_name[name]
        found.append(Route(path, name, summary,
                           message_factory.GetMessageClass(method.input_type),
                           message_factory.GetMessageClass(method.output_type),
                           method.server_streaming))
    return tuple(found)
