"""`streamrag query "question"`: ask the inference API; print the answer and its citations."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from services.cli.render import citation_check_lines
from services.cli.settings import MeshSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

TEXT_PREVIEW = 80
ID_WIDTH = 24


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="ask a question over the indexed documents")
    p.add_argument("question")
    p.add_argument("--since", default="", help='"24h", "30m", "7d" ago, or ISO 8601 with zone')
    p.add_argument("--until", default="", help="same forms as --since")
    p.add_argument("--domain", default="", help="only chunks of this domain")
    p.add_argument("--source", default="", help="only chunks of this source")
    p.add_argument("--top-k", type=int, default=0, help="citations to retrieve (0: server's)")
    p.add_argument("--stream", action="store_true", help="print the answer as it arrives")
    p.add_argument("--mode", default="", choices=["", "extractive", "generative", "auto"],
                   help="quote sentences (extractive), let the model write (generative), "
                        "or let the server pick (auto); default: the server's")
    p.add_argument("--max-new-tokens", type=int, default=0,
                   help="answer length: tokens generated, or words quoted (0: server's)")
    p.add_argument("--target", default=None,
                   help="inference API host:port (default: STREAMRAG_MESH_INFERENCE_TARGET)")
    p.add_argument("--json", action="store_true",
                   help="print the response as JSON (one line per message with --stream)")
    p.add_argument("--timeout", type=float, default=30.0, help="deadline in seconds")
    p.add_argument("--token", default=None,
                   help="bearer token to authenticate with (a JWT or the service account's "
                        "token; default: STREAMRAG_MESH_INFERENCE_TOKEN, else none)")


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    request = pb.QueryRequest(question=args.question, top_k=args.top_k, since=args.since,
                              until=args.until, domain=args.domain, source=args.source,
                              answer_mode=args.mode, max_new_tokens=args.max_new_tokens)
    mesh = MeshSettings()
    target = args.target or mesh.inference_target
    metadata = bearer(args.token, mesh)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.InferenceStub(channel)
        try:
            if args.stream:
                _stream(stub.StreamQuery(request, timeout=args.timeout, metadata=metadata),
                        args.json, out)
            else:
                _print_response(stub.Query(request, timeout=args.timeout, metadata=metadata),
                                args.json, out)
        except grpc.RpcError as exc:
            if args.stream:
                print(file=out)  # end a half-printed answer before the error
            print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)
            caller = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)
            return 2 if exc.code() in caller else 1
    return 0


def bearer(token: str | None, mesh: MeshSettings) -> tuple[tuple[str, str], ...]:
    """The call's authorization metadata: --token, else the setting, else none."""
    if token is None and mesh.inference_token is not None:
        token = mesh.inference_token.get_secret_value()
    return (("authorization", f"Bearer {token}"),) if token else ()


def _print_response(response: pb.QueryResponse, as_json: bool, out: TextIO) -> None:
    if as_json:
        print(_json(response, indent=2), file=out)
        return
    print(response.answer or "(no answer: nothing relevant was retrieved)", file=out)
    _print_sources(response.citations, response.answer_mode, response.answer_mode_reason,
                   response.missing_shards, out)
    _print_check(response.citations, response.cited_chunk_ids, response.citation_check, out)
    print(f"retrieval {response.timings.retrieval_ms:.0f} ms, "
          f"total {response.timings.total_ms:.0f} ms", file=out)


def _stream(messages: Iterable[pb.StreamQueryResponse], as_json: bool, out: TextIO) -> None:
    start = pb.StreamStart()
    for message in messages:
        if as_json:
            print(_json(message), file=out, flush=True)
        elif message.HasField("start"):
            start = message.start
        elif message.HasField("delta"):
            print(message.delta, end="", file=out, flush=True)
        elif message.HasField("end"):
            print(file=out)
            _print_sources(start.citations, start.answer_mode, start.answer_mode_reason,
                           start.missing_shards, out)
            _print_check(start.citations, message.end.cited_chunk_ids,
                         message.end.citation_check, out)
            t = message.end.timings
            print(f"retrieval {t.retrieval_ms:.0f} ms, total {t.total_ms:.0f} ms, "
                  f"finish: {message.end.finish_reason}", file=out)


MODE_LINES = {"extractive": "sentences quoted from the sources below",
              "generative": "written by the language model from the sources below"}


# Why auto (or the support check) served the answer it did, as a person reads it; any
# other reason ("unsupported: ...", "deadline: ...") is printed as the server wrote it.
REASONS = {
    "deadline": "auto quoted: a generated answer would not fit the call's deadline",
    "overload": "auto quoted: the generator's queue is full",
    "no_generator": "no generator is loaded",
    "latency_objective": "auto quoted: a generated answer would take longer than its "
                         "latency objective (STREAMRAG_INFERENCE_AUTO_LATENCY_OBJECTIVE_MS)",
    "quality": "auto quoted: most of the model's recent generated answers were replaced "
               "as unsupported by their sources",
}
QUIET = ("", "requested", "default", "fits")


def reason_line(reason: str) -> str:
    """answer_mode_reason for a person ("" when the mode is simply the one asked for)."""
    return "" if reason in QUIET else REASONS.get(reason, reason)


def _print_sources(citations: Sequence[pb.Citation], mode: str, reason: str,
                   missing: Sequence[int], out: TextIO) -> None:
    why = f"; {line}" if (line := reason_line(reason)) else ""
    print(f"\n({mode} answer: {MODE_LINES.get(mode, mode)}{why})", file=out)
    if missing:
        shards = ", ".join(str(s) for s in missing)
        print(f"partial result: shard(s) {shards} did not answer", file=out)
    print(format_citations(citations), file=out)


def _print_check(citations: Sequence[pb.Citation], cited: Sequence[str],
                 check: pb.CitationCheck, out: TextIO) -> None:
    print("\n".join(citation_check_lines(citations, cited, check)), file=out)


def format_citations(citations: Sequence[pb.Citation]) -> str:
    """A fixed-width table: n, score, doc id, chunk id, event time, the text's start."""
    rows = [("n", "score", "doc id", "chunk id", "event time", "text")]
    for n, c in enumerate(citations, start=1):
        text = " ".join(c.text.split())
        preview = text if len(text) <= TEXT_PREVIEW else text[: TEXT_PREVIEW - 1] + "…"
        rows.append((str(n), f"{c.score:.3f}", _clip(c.doc_id), _clip(c.chunk_id),
                     c.event_time_iso[:19].replace("T", " "), preview))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join([*(r[i].ljust(widths[i]) for i in range(5)), r[5]]).rstrip()
                     for r in rows)


def _clip(value: str) -> str:
    return value if len(value) <= ID_WIDTH else value[: ID_WIDTH - 1] + "…"


def _json(message: Message, indent: int | None = None) -> str:
    data = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)
    return json.dumps(data, indent=indent, ensure_ascii=False)
