"""The HTTP face's conversions, without a server: JSON bodies to proto requests (refusals
naming the field), replies to canonical JSON, and each failure to its HTTP status."""

from __future__ import annotations

import grpc
import pytest

from services.inference.api.auth import AuthError
from services.inference.api.jsoncodec import failure, parse_request, refusal, to_json
from services.inference.api.status import DeadlineError, status_of
from services.inference.errors import (
    NoGeneratorError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
)
from shared.batching.queue import QueueFullError
from shared.errors import InfrastructureError, InvalidInput
from shared.rpc.streamrag.v1 import inference_pb2 as pb


def refused(body: bytes, kind: type = pb.QueryRequest) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as err:
        parse_request(body, kind)
    return err.value.reason, err.value.field or ""


def test_either_spelling_of_a_field_is_read_and_int64_may_be_a_string() -> None:
    request = parse_request(b'{"question": "q", "topK": 3, "deadline_ms": 250, '
                            b'"stop": ["\\n"]}', pb.QueryRequest)
    assert request == pb.QueryRequest(question="q", top_k=3, deadline_ms=250, stop=["\n"])
    feedback = parse_request(b'{"chunk_id": "c", "kind": "FEEDBACK_KIND_CLICK", '
                             b'"config_version": "7"}', pb.FeedbackRequest)
    assert (feedback.kind, feedback.config_version) == (pb.FEEDBACK_KIND_CLICK, 7)


def test_an_empty_body_is_the_empty_request() -> None:
    assert parse_request(b"", pb.InfoRequest) == pb.InfoRequest()
    assert parse_request(b"  \n", pb.QueryRequest) == pb.QueryRequest()


@pytest.mark.parametrize(("body", "reason", "field"), [
    (b"{not json", "bad_json", "body"),
    (b"\xff\xfe", "bad_json", "body"),
    (b'["q"]', "not_an_object", "body"),
    (b'"q"', "not_an_object", "body"),
    (b'{"top_k": "five"}', "wrong_type", "top_k"),
    (b'{"topK": 2.5}', "wrong_type", "top_k"),
    (b'{"question": 5}', "wrong_type", "question"),
    (b'{"stop": "\\n"}', "wrong_type", "stop"),
    (b'{"temperature": "hot"}', "wrong_type", "temperature"),
    (b'{"question": "q", "qestion": "q"}', "unknown_field", "qestion"),
    (b'{"top_k": 1, "topK": 2}', "duplicate_field", "top_k"),
])
def test_a_bad_body_is_refused_naming_the_field(body: bytes, reason: str, field: str) -> None:
    assert refused(body) == (reason, field)


def test_an_unknown_enum_name_says_which_names_are_known() -> None:
    with pytest.raises(InvalidInput) as err:
        parse_request(b'{"kind": "LIKE"}', pb.FeedbackRequest)
    assert (err.value.reason, err.value.field) == ("wrong_type", "kind")
    assert "FEEDBACK_KIND_CLICK" in err.value.detail and "LIKE" not in err.value.detail


def test_a_refusal_quotes_no_value_and_no_long_key() -> None:
    secret = "4111 1111 1111 1111"
    with pytest.raises(InvalidInput) as err:
        parse_request(f'{{"top_k": "{secret}"}}'.encode(), pb.QueryRequest)
    assert secret not in str(err.value)
    assert refused(b'{"' + b"k" * 65 + b'": 1}') == ("unknown_field", "body")


def test_replies_use_proto_names_print_zeros_and_write_int64_as_strings() -> None:
    reply = pb.RetrieveResponse(chunks=[pb.Citation(chunk_id="c", score=0.5)],
                                config_version=3, shard_errors={2: "timeout"})
    body = to_json(reply)
    assert body["chunks"][0]["chunk_id"] == "c" and body["chunks"][0]["event_time"] == 0
    assert body["partial"] is False and body["missing_shards"] == []
    assert body["config_version"] == "3" and body["shard_errors"] == {"2": "timeout"}
    assert "rerank_score" not in body["chunks"][0]  # optional and unset: absent, as in gRPC


@pytest.mark.parametrize(("exc", "http", "name"), [
    (InvalidInput("out_of_range", "top_k", "1..50"), 400, "INVALID_ARGUMENT"),
    (OutOfRangeError("too_old", "at", "older than retention"), 400, "OUT_OF_RANGE"),
    (NoGeneratorError("none loaded"), 400,
     "FAILED_PRECONDITION"),
    (PermissionDeniedError("needs_all_access", "request", "no"), 403, "PERMISSION_DENIED"),
    (NotFoundError("unknown_chunk", "chunk_id", "no such"), 404, "NOT_FOUND"),
    (QueueFullError("encoder queue full"), 429, "RESOURCE_EXHAUSTED"),
    (InfrastructureError("warming up"), 503, "UNAVAILABLE"),
    (DeadlineError("deadline_ms 5 passed"), 504, "DEADLINE_EXCEEDED"),
    (KeyError("stored text"), 500, "INTERNAL"),
])
def test_each_failure_gets_its_http_status(exc: Exception, http: int, name: str) -> None:
    status, body = failure(status_of(exc))
    assert (status, body["error"]["code"], body["error"]["status"]) == (http, http, name)
    assert body["error"]["message"] == status_of(exc)[1]
    if isinstance(exc, InvalidInput):  # the same reason and field gRPC sends as metadata
        assert (body["error"]["reason"], body["error"]["field"]) == (exc.reason, exc.field)
    else:
        assert "reason" not in body["error"] and "field" not in body["error"]
    assert "stored text" not in str(body)


def test_an_auth_refusal_is_401_with_its_reason() -> None:
    status, body = refusal(AuthError("expired", "the token has expired (exp)"))
    assert status == 401 and body["error"]["status"] == grpc.StatusCode.UNAUTHENTICATED.name
    assert body["error"]["reason"] == "expired" and "Bearer" in body["error"]["message"]
