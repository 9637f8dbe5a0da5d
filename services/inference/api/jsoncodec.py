"""The HTTP API's JSON bodies to and from protobuf messages, and a failure to its HTTP answer.

Bodies are protobuf's canonical JSON mapping (google.protobuf.json_format). Replies name
fields as the proto does (`top_k`, not `topK`: preserving_proto_field_name), so they read
like the .proto, the OpenAPI document and the gRPC docs; requests may use either spelling,
as the mapping allows. Replies print every field, zeros included (an empty `answer` or a
`partial: false` is said, not left for the reader to infer). 64-bit integers are JSON
strings, as the mapping says ("config_version": "3"); requests may send them either way.

A request body is checked one field at a time so that a refusal names the field (as gRPC's
INVALID_ARGUMENT does) and quotes nothing that was sent.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from services.inference.api.auth import AuthError
from services.inference.api.status import Status
from shared.errors import InvalidInput

M = TypeVar("M", bound=Message)
# google.rpc's mapping of status codes to HTTP (google/rpc/code.proto); anything else is 500.
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
MAX_NAME_CHARS = 64  # an unknown key longer than this is not echoed in the refusal
_KINDS = {
    FieldDescriptor.TYPE_STRING: "a string", FieldDescriptor.TYPE_BOOL: "true or false",
    FieldDescriptor.TYPE_DOUBLE: "a number", FieldDescriptor.TYPE_FLOAT: "a number",
    FieldDescriptor.TYPE_BYTES: "base64 text", FieldDescriptor.TYPE_MESSAGE: "an object",
}


def to_json(message: Message) -> dict[str, Any]:
    """A reply's body."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def parse_request(raw: bytes, kind: type[M]) -> M:
    """The request message of a body; an empty body is the empty message (Info's)."""
    if not raw.strip():
        return kind()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput("bad_json", "body", "the body is not JSON (UTF-8)") from exc
    if not isinstance(body, dict):
        raise InvalidInput("not_an_object", "body", "a JSON object of the request's fields")
    message, seen = kind(), set[str]()
    for key, value in body.items():
        field = _field(kind, key)
        if field.name in seen:
            raise InvalidInput("duplicate_field", field.name, "given twice (two spellings)")
        seen.add(field.name)
        part = kind()
        try:
            json_format.ParseDict({key: value}, part)
        except (json_format.ParseError, TypeError, ValueError) as exc:
            raise InvalidInput("wrong_type", field.name, f"must be {expected(field)}") from exc
        message.MergeFrom(part)
    return message


def _field(kind: type[Message], key: str) -> FieldDescriptor:
    fields = kind.DESCRIPTOR.fields
    for field in fields:
        if key in (field.name, field.json_name):
            return field
    shown = key if len(key) <= MAX_NAME_CHARS and key.isprintable() else "body"
    names = ", ".join(f.name for f in fields) or "none"
    raise InvalidInput("unknown_field", shown,
                       f"{kind.DESCRIPTOR.name} has no such field (it has: {names})")


def expected(field: FieldDescriptor) -> str:
    """What a field's JSON value must be, in words."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return "an object"
    if field.type == FieldDescriptor.TYPE_ENUM:
        one = "one of " + ", ".join(v.name for v in field.enum_type.values)
    else:
        one = _KINDS.get(field.type, "an integer")
    return f"a list, each {one}" if field.is_repeated else one


def failure(status: Status) -> tuple[int, dict[str, Any]]:
    """The HTTP status and error body of a failed call: the gRPC code's name, its details
    and, where gRPC sends them as metadata, the same reason and field."""
    code, details, _, trailing = status
    error: dict[str, Any] = {"code": HTTP_STATUS.get(code, 500), "status": code.name,
                             "message": details}
    error.update((key.removeprefix("streamrag-"), value) for key, value in trailing)
    return error["code"], {"error": error}


def refusal(exc: AuthError) -> tuple[int, dict[str, Any]]:
    """401 for a caller without acceptable credentials (auth.py's reasons)."""
    details = f"{exc.reason}: {exc.detail}; send 'Authorization: Bearer <token>'"
    return failure((grpc.StatusCode.UNAUTHENTICATED, details, exc.reason,
                    (("streamrag-reason", exc.reason),)))
