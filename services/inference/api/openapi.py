"""The HTTP API's OpenAPI 3.1 document, generated from the proto's descriptors at start.

One path per route (routes.py), every message schema from its descriptor's fields: scalar
types as protobuf's canonical JSON mapping writes them (64-bit integers as strings), enums
by name, repeated fields as arrays, maps as objects, nested messages by reference. Nothing
here is kept by hand but the error body, which is the HTTP face's own (jsoncodec.failure).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from services.inference.api.routes import routes

PATH = "/openapi.json"
Schema = dict[str, Any]
_F = FieldDescriptor
_SCALARS: dict[int, Schema] = {
    _F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    _F.TYPE_FLOAT: {"type": "number", "format": "float"},
    _F.TYPE_INT32: {"type": "integer", "format": "int32"},
    _F.TYPE_SINT32: {"type": "integer", "format": "int32"},
    _F.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    _F.TYPE_UINT32: {"type": "integer", "format": "int64", "minimum": 0},
    _F.TYPE_FIXED32: {"type": "integer", "format": "int64", "minimum": 0},
    # The mapping writes 64-bit integers as strings (JavaScript's numbers lose them).
    _F.TYPE_INT64: {"type": "string", "format": "int64"},
    _F.TYPE_SINT64: {"type": "string", "format": "int64"},
    _F.TYPE_SFIXED64: {"type": "string", "format": "int64"},
    _F.TYPE_UINT64: {"type": "string", "format": "uint64"},
    _F.TYPE_FIXED64: {"type": "string", "format": "uint64"},
    _F.TYPE_BOOL: {"type": "boolean"},
    _F.TYPE_STRING: {"type": "string"},
    _F.TYPE_BYTES: {"type": "string", "format": "byte"},
}
ERROR: Schema = {
    "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["code", "status", "message"],
        "properties": {
            "code": {"type": "integer", "description": "the HTTP status"},
            "status": {"type": "string", "description": "the gRPC status code's name"},
            "message": {"type": "string"},
            "reason": {"type": "string",
                       "description": "the same reason code as gRPC's streamrag-reason"},
            "field": {"type": "string", "description": "the request field at fault"},
        }}},
}


def document() -> dict[str, Any]:
    schemas: dict[str, Schema] = {"Error": ERROR}
    paths: dict[str, Any] = {}
    for route in routes():
        request = _ref(route.request.DESCRIPTOR, schemas)
        reply = _ref(route.response.DESCRIPTOR, schemas)
        content = ({"text/event-stream": {"schema": reply, "description":
                    "one event per message, named for its oneof choice; data: its JSON"}}
                   if route.streams else {"application/json": {"schema": reply}})
        paths[route.path] = {"post": {
            "operationId": route.method, "summary": route.summary,
            "description": f"streamrag.v1.Inference/{route.method} over HTTP",
            "requestBody": {"required": False,
                            "content": {"application/json": {"schema": request}}},
            "responses": {"200": {"description": "OK", "content": content},
                          "default": {"description": "a failure, as gRPC's status",
                                      "content": {"application/json": {
                                          "schema": {"$ref": "#/components/schemas/Error"}}}}},
        }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "streamrag Inference HTTP API", "version": "v1",
                 "description": "The gRPC API's calls with protobuf's canonical JSON mapping "
                                "(proto field names in replies)."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer",
                       "description": "the service token or a user's JWT, as for gRPC"}}},
        "security": [{"bearer": []}],
    }


def _ref(message: Descriptor | EnumDescriptor, schemas: dict[str, Schema]) -> Schema:
    """A reference to the schema of `message`, added to `schemas` with what it refers to."""
    if message.name not in schemas:
        schemas[message.name] = {}  # first, so a recursive message ends
        schemas[message.name] = (_enum(message) if isinstance(message, EnumDescriptor)
                                 else _message(message, schemas))
    return {"$ref": f"#/components/schemas/{message.name}"}


def _enum(enum: EnumDescriptor) -> Schema:
    return {"type": "string", "enum": [v.name for v in enum.values]}


def _message(message: Descriptor, schemas: dict[str, Schema]) -> Schema:
    schema: Schema = {"type": "object",
                      "properties": {f.name: _field(f, schemas) for f in message.fields}}
    choices = [o for o in message.oneofs if not o.name.startswith("_")]  # not `optional`'s
    if choices:
        schema["description"] = "; ".join(
            f"at most one of {', '.join(f.name for f in o.fields)}" for o in choices)
    return schema


def _field(field: FieldDescriptor, schemas: dict[str, Schema]) -> Schema:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        schema = {"type": "object", "additionalProperties": _one(value, schemas)}
        if key.type != _F.TYPE_STRING and key.type != _F.TYPE_BOOL:  # integers, as strings
            schema["propertyNames"] = {"pattern": "^-?[0-9]+$"}
        return schema
    one = _one(field, schemas)
    return {"type": "array", "items": one} if field.is_repeated else one


def _one(field: FieldDescriptor, schemas: dict[str, Schema]) -> Schema:
    if field.message_type is not None:
        return _ref(field.message_type, schemas)
    if field.enum_type is not None:
        return _ref(field.enum_type, schemas)
    return dict(_SCALARS[field.type])
