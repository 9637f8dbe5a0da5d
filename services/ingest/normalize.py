"""Raw input bytes to one Document: plain documents, Debezium change events, mapped API JSON.

Pure functions, no Kafka: `parse_raw` raises InvalidInput with a stable reason code for
anything it refuses. The version is assigned later, by dedup.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.ingest.settings import FieldMapping, IngestSettings
from shared.errors import InvalidInput
from shared.records import Document

PLAIN_VERSIONS = frozenset({1})
CDC_OPS = {"c": "upsert", "u": "upsert", "r": "upsert", "d": "delete"}
SOURCE_HEADER = "streamrag-source"
_CONTROL = {c for c in range(32) if chr(c) not in "\t\n\r"}


@dataclass(frozen=True)
class RawMessage:
    value: bytes | None
    timestamp: float  # the Kafka record timestamp, seconds
    headers: dict[str, bytes]


def parse_raw(msg: RawMessage, settings: IngestSettings, now: float | None = None) -> Document:
    obj = _load(msg.value, settings.max_payload_bytes)
    ingest_time = time.time() if now is None else now
    source_name = msg.headers.get(SOURCE_HEADER)
    if source_name is not None:
        return _from_api(obj, source_name.decode("utf-8", "replace"), msg, settings, ingest_time)
    if _is_debezium(obj):
        return _from_cdc(obj, msg, settings, ingest_time)
    return _from_plain(obj, msg, settings, ingest_time)


def content_hash(op: str, text: str, title: str, domain: str, metadata: dict[str, str]) -> str:
    canon = json.dumps([op, text, title, domain, sorted(metadata.items())], ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _load(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    if value is None or len(value) == 0:
        raise InvalidInput("empty_value", detail="record has no value")
    if len(value) > max_bytes:
        raise InvalidInput("payload_too_large", detail=f"{len(value)} bytes > {max_bytes}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("not_utf8", detail=f"invalid byte at {exc.start}") from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise InvalidInput("malformed_json", detail=msg) from exc
    if not isinstance(obj, dict):
        raise InvalidInput("not_an_object", detail=f"top level is {type(obj).__name__}")
    return obj


def _is_debezium(obj: dict[str, Any]) -> bool:
    body = obj.get("payload", obj) if isinstance(obj.get("payload"), dict) else obj
    return "op" in body and ("before" in body or "after" in body)


def _str_field(obj: dict[str, Any], name: str, *, required: bool, path: str | None = None) -> str:
    value = obj.get(name)
    where = path or name
    if value is None:
        if required:
            raise InvalidInput("missing_field", where)
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidInput("wrong_type", where, f"expected string, got {type(value).__name__}")
    return str(value)


def _check_text(text: str, field: str) -> str:
    if any(ord(ch) in _CONTROL for ch in text):
        raise InvalidInput("binary_content", field, "control characters in text")
    return text


def _check_id(doc_id: str, field: str, settings: IngestSettings) -> str:
    if not doc_id.strip():
        raise InvalidInput("missing_field", field, "empty id")
    if len(doc_id) > settings.max_id_length:
        raise InvalidInput("id_too_long", field, f"{len(doc_id)} > {settings.max_id_length}")
    return _check_text(doc_id, field)


def _event_time(value: Any, field: str, fallback: float) -> float:
    if value is None or value == "":
        return fallback
    if isinstance(value, bool):
        raise InvalidInput("invalid_event_time", field, "boolean")
    if isinstance(value, int | float):
        return value / 1000.0 if value > 1e11 else float(value)  # ms or s since epoch
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInput("invalid_event_time", field, "not ISO 8601") from exc
        if parsed.tzinfo is None:
            raise InvalidInput("invalid_event_time", field, "ISO 8601 without a timezone")
        return parsed.timestamp()
    raise InvalidInput("invalid_event_time", field, f"got {type(value).__name__}")


def _metadata(value: Any, field: str = "metadata") -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("wrong_type", field, f"expected object, got {type(value).__name__}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, dict | list):
            raise InvalidInput("wrong_type", f"{field}.{k}", "metadata values must be scalars")
        out[str(k)] = _check_text("" if v is None else str(v), f"{field}.{k}")
    return out


def _document(
    *, doc_id: str, op: str, text: str, title: str, source: str, kind: str, domain: str,
    event_time: float, ingest_time: float, metadata: dict[str, str],
) -> Document:
    if op == "upsert" and not text.strip():
        raise InvalidInput("empty_text", "text", "an upsert needs text")
    if op == "delete":
        text, title, metadata = "", "", {}
    return Document(
        doc_id=doc_id, version=1, op=op, text=text, title=title, source=source,  # type: ignore[arg-type]
        source_kind=kind, domain=domain or "default", event_time=event_time,  # type: ignore[arg-type]
        ingest_time=ingest_time, metadata=metadata,
        content_hash=content_hash(op, text, title, domain, metadata),
    )


def _from_plain(obj: dict[str, Any], msg: RawMessage, s: IngestSettings, now: float) -> Document:
    version = obj.get("schema_version", 1)
    if version not in PLAIN_VERSIONS:
        raise InvalidInput("unknown_schema_version", "schema_version",
                           f"got {version!r}, ingest knows {sorted(PLAIN_VERSIONS)}")
    op = obj.get("op", "upsert")
    if op not in ("upsert", "delete"):
        raise InvalidInput("unknown_op", "op", "expected upsert or delete")
    return _document(
        doc_id=_check_id(_str_field(obj, "id", required=True), "id", s),
        op=op,
        text=_check_text(_str_field(obj, "text", required=op == "upsert"), "text"),
        title=_check_text(_str_field(obj, "title", required=False), "title"),
        source=_check_text(_str_field(obj, "source", required=True), "source"),
        kind="document",
        domain=_check_text(_str_field(obj, "domain", required=False), "domain"),
        event_time=_event_time(obj.get("event_time"), "event_time", msg.timestamp),
        ingest_time=now,
        metadata=_metadata(obj.get("metadata")),
    )


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _mapped(obj: dict[str, Any], m: FieldMapping, prefix: str) -> dict[str, Any]:
    """Apply a field mapping; field names in errors are the mapped paths."""
    def get_str(path: str | None, required: bool) -> str:
        if path is None:
            return ""
        value = _lookup(obj, path)
        full = f"{prefix}{path}"
        if value is None:
            if required:
                raise InvalidInput("missing_field", full)
            return ""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidInput("wrong_type", full, f"expected string, got {type(value).__name__}")
        return _check_text(str(value), full)

    meta = {k: get_str(p, False) for k, p in m.metadata.items()}
    return dict(
        doc_id=get_str(m.id, True), text=get_str(m.text, False), title=get_str(m.title, False),
        domain=get_str(m.domain, False) or m.default_domain,
        event_time_raw=_lookup(obj, m.event_time) if m.event_time else None,
        metadata={k: v for k, v in meta.items() if v},
    )


def _from_cdc(obj: dict[str, Any], msg: RawMessage, s: IngestSettings, now: float) -> Document:
    body = obj["payload"] if isinstance(obj.get("payload"), dict) else obj
    op = CDC_OPS.get(body.get("op"))  # type: ignore[arg-type]
    if op is None:
        raise InvalidInput("unknown_op", "op", "Debezium op must be c, u, d or r")
    src = body.get("source") if isinstance(body.get("source"), dict) else {}
    table = str(src.get("table", "")) if src else ""
    db = str(src.get("db", "")) if src else ""
    mapping = s.cdc_mappings.get(f"{db}.{table}") or s.cdc_mappings.get(table) \
        or s.cdc_mappings.get("*")
    if mapping is None:
        raise InvalidInput("unmapped_source", "source.table", f"no CDC mapping for {db}.{table}")
    row_name = "before" if op == "delete" else "after"
    row = body.get(row_name)
    if not isinstance(row, dict):
        raise InvalidInput("missing_field", row_name, f"op {body.get('op')} needs '{row_name}'")
    f = _mapped(row, mapping, f"{row_name}.")
    ts = body.get("ts_ms")
    fallback = _event_time(ts, "ts_ms", msg.timestamp) if ts is not None else msg.timestamp
    return _document(
        doc_id=_check_id(f["doc_id"], f"{row_name}.{mapping.id}", s), op=op,
        text=f["text"], title=f["title"], source=f"cdc:{db}.{table}".replace(":.", ":"),
        kind="cdc", domain=f["domain"],
        event_time=_event_time(f["event_time_raw"], "event_time", fallback),
        ingest_time=now, metadata=f["metadata"],
    )


def _from_api(obj: dict[str, Any], name: str, msg: RawMessage, s: IngestSettings,
              now: float) -> Document:
    mapping = s.api_mappings.get(name)
    if mapping is None:
        raise InvalidInput("unmapped_source", SOURCE_HEADER, f"no API mapping named {name!r}")
    f = _mapped(obj, mapping, "")
    deleted = obj.get("deleted") is True or obj.get("op") == "delete"
    return _document(
        doc_id=_check_id(f["doc_id"], mapping.id, s), op="delete" if deleted else "upsert",
        text=f["text"], title=f["title"], source=f"api:{name}", kind="api", domain=f["domain"],
        event_time=_event_time(f["event_time_raw"], mapping.event_time or "event_time",
                               msg.timestamp),
        ingest_time=now, metadata=f["metadata"],
    )
