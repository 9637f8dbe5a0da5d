"""Bytes on a topic to records and back; every failure is an InvalidInput with a reason."""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import ValidationError

from shared.contract.records import Record
from shared.errors import InvalidInput

R = TypeVar("R", bound=Record)


def encode(record: Record) -> bytes:
    return record.model_dump_json().encode("utf-8")


def decode(cls: type[R], raw: bytes | None) -> R:
    """Parse a record of `cls`, refusing unknown schema versions and wrong fields."""
    if raw is None:
        raise InvalidInput("empty_value", detail="record has no value")
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise InvalidInput("not_utf8", detail=str(exc.reason)) from exc
    except json.JSONDecodeError as exc:
        msg = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise InvalidInput("malformed_json", detail=msg) from exc
    except RecursionError as exc:  # anyone can produce to a topic: deep nesting is input
        raise InvalidInput("too_deep", detail="JSON nested too deeply") from exc
    except ValueError as exc:  # an integer past Python's digit limit
        raise InvalidInput("number_too_large", detail=type(exc).__name__) from exc
    if not isinstance(data, dict):
        raise InvalidInput("not_an_object", detail=type(data).__name__)
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version not in cls.KNOWN_VERSIONS:
        known = sorted(cls.KNOWN_VERSIONS)
        raise InvalidInput("unknown_schema_version", "schema_version",
                           f"got {version!r}, this reader knows {known}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise InvalidInput("invalid_field", field, first["type"]) from exc
