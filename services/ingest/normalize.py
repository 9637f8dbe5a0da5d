"""Raw input bytes to one Document: plain documents, Debezium change events, mapped API JSON.

Pure functions, no Kafka: `parse_raw` returns a valid Document or raises InvalidInput with
a stable reason code for anything it refuses, never another exception (a property test
holds it to that). Types are exactly as the README documents them: text fields are JSON
strings; ids are strings, or integers in mapped (CDC, API) rows where keys are numeric;
metadata values are scalars; access labels (`acl`) are a list of labels or one
comma-separated string (shared.contract.access grammar), and a document whose input names
none gets the configured default. Each Document carries its source's ordering key
(`position`, built by services.ingest.ordering); the version is assigned later, by dedup.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from services.ingest.identifiers import check_identifier
from services.ingest.ordering import api_position, cdc_position, plain_position
from services.ingest.rawjson import load_object
from services.ingest.settings import CDC_ACL_COLUMN, FieldMapping, IngestSettings
from shared.contract import forget
from shared.contract.access import parse_acl
from shared.contract.records import Document, Position, TableTruncate
from shared.errors import InvalidInput
from shared.text.visible import blank

PLAIN_VERSIONS = frozenset({1})
CDC_OPS = {"c": "upsert", "u": "upsert", "r": "upsert", "d": "delete"}
SOURCE_HEADER = "streamrag-source"
# The source of a forget request until dedup gives it the document's own.
FORGET_SOURCE = "streamrag.forget"
# C0 (but tab and line breaks), DEL and C1: none of them is text.
_CONTROL = frozenset(chr(c) for c in [*range(32), *range(0x7F, 0xA0)] if chr(c) not in "\t\n\r")


@dataclass(frozen=True)
class RawMessage:
    value: bytes | None
    timestamp: float  # the Kafka record timestamp, seconds
    headers: dict[str, bytes]
    repeated_headers: frozenset[str] = frozenset()  # names the record carries more than once

    @classmethod
    def from_kafka(cls, value: bytes | None, timestamp: float,
                   headers: list[tuple[str, bytes]]) -> RawMessage:
        names = [name for name, _ in headers]
        repeated = frozenset(n for n in names if names.count(n) > 1)
        return cls(value, timestamp, dict(headers), repeated)


def parse_raw(msg: RawMessage, settings: IngestSettings,
              now: float | None = None) -> Document | TableTruncate:
    obj = load_object(msg.value, max_bytes=settings.max_payload_bytes,
                      max_depth=settings.max_json_depth, max_digits=settings.max_number_digits)
    ingest_time = time.time() if now is None else now
    if SOURCE_HEADER in msg.repeated_headers:
        raise InvalidInput("invalid_header", SOURCE_HEADER, "header given more than once")
    if SOURCE_HEADER in msg.headers:
        name = check_identifier(_header(msg.headers[SOURCE_HEADER]), SOURCE_HEADER)
        return _from_api(obj, name, msg, settings, ingest_time)
    if _is_debezium(obj):
        return _from_cdc(obj, msg, settings, ingest_time)
    return _from_plain(obj, msg, settings, ingest_time)


def content_hash(op: str, text: str, title: str, domain: str, metadata: dict[str, str],
                 acl: tuple[str, ...] = ()) -> str:
    """What dedup compares: a change to any of these, the labels included, is a new version
    (a revoked group loses access as fast as a content change reaches the index). Without
    labels the hash is the one documents had before labels existed."""
    parts: list[object] = [op, text, title, domain, sorted(metadata.items())]
    if acl:
        parts.append(list(acl))
    canon = json.dumps(parts, ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def labels(value: Any, field: str, settings: IngestSettings) -> tuple[str, ...]:
    """The labels an input gives at `field`, or the configured default when it gives none
    (absent or null); anything outside the grammar is InvalidInput(bad_acl). A string that
    holds a JSON list (a json/jsonb column as Debezium sends it) is read as that list: `[`
    is no label character, so no comma-separated string means anything else."""
    if value is None:
        return settings.default_labels
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput("bad_acl", field, "neither labels nor a JSON list") from exc
        if not isinstance(value, list):
            raise InvalidInput("bad_acl", field, "neither labels nor a JSON list")
    return parse_acl(value, field)


def _header(value: Any) -> str:
    if not isinstance(value, bytes):
        raise InvalidInput("invalid_header", SOURCE_HEADER, "header has no value")
    try:
        name = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("invalid_header", SOURCE_HEADER, "header is not UTF-8") from exc
    if not name.isprintable() or len(name) > 256:
        raise InvalidInput("invalid_header", SOURCE_HEADER, "not a printable source name")
    return name


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
    if not isinstance(value, str):
        raise InvalidInput("wrong_type", where, f"expected string, got {type(value).__name__}")
    return value


def _check_text(text: str, field: str) -> str:
    if not _CONTROL.isdisjoint(text):
        raise InvalidInput("binary_content", field, "control characters in text")
    return text


def _check_source(source: str) -> str:
    """A plain document names its source: watermarks, statistics and audit group by it."""
    if blank(source):
        raise InvalidInput("missing_field", "source", "empty source")
    return check_identifier(source, "source")


def _check_id(doc_id: str, field: str, settings: IngestSettings) -> str:
    """Ids: 1 to max_id_length characters, not blank, no control/format/unassigned ones."""
    if doc_id == "":
        raise InvalidInput("missing_field", field, "empty id")
    if len(doc_id) > settings.max_id_length:
        raise InvalidInput("id_too_long", field, f"{len(doc_id)} > {settings.max_id_length}")
    if any(unicodedata.category(ch)[0] == "C" for ch in doc_id):
        raise InvalidInput("invalid_id", field, "control, format or unassigned character")
    if blank(doc_id):
        raise InvalidInput("invalid_id", field, "blank id")
    return check_identifier(doc_id, field)


def _event_time(value: Any, field: str, fallback: float, s: IngestSettings) -> float:
    """Seconds since the epoch from ISO 8601 or epoch s/ms, within the configured bounds."""
    if value is None or value == "":
        seconds, field = fallback, "timestamp"  # the Kafka record's own timestamp
    elif isinstance(value, bool):
        raise InvalidInput("invalid_event_time", field, "boolean")
    elif isinstance(value, int | float):
        seconds = value / 1000.0 if value > 1e11 else float(value)  # ms or s since epoch
    elif isinstance(value, str):
        seconds = _iso_seconds(value, field)
    else:
        raise InvalidInput("invalid_event_time", field, f"got {type(value).__name__}")
    low, high = s.min_event_time.timestamp(), s.max_event_time.timestamp()
    if not (math.isfinite(seconds) and low <= seconds < high):
        raise InvalidInput("event_time_out_of_range", field,
                           f"outside [{s.min_event_time:%Y-%m-%d}, {s.max_event_time:%Y-%m-%d})")
    return seconds


def _iso_seconds(value: str, field: str) -> float:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput("invalid_event_time", field, "not ISO 8601") from exc
    if parsed.tzinfo is None:
        raise InvalidInput("invalid_event_time", field, "ISO 8601 without a timezone")
    try:
        return parsed.timestamp()
    except (OverflowError, ValueError) as exc:  # year 1 at +14:00 is before year 1 UTC
        raise InvalidInput("event_time_out_of_range", field, "outside the calendar") from exc


def _given(raw: Any, seconds: float) -> float | None:
    """The event time when the source gave one; None when it is the Kafka timestamp's,
    which says when a producer sent a change, not where it sits among the document's."""
    return None if raw is None or raw == "" else seconds


def _scalar(value: Any, field: str) -> str:
    """A metadata value as text: strings as they are, finite numbers and booleans as JSON."""
    if isinstance(value, str):
        return _check_text(value, field)
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    raise InvalidInput("wrong_type", field, "metadata values must be scalars")


def _metadata(value: Any, field: str = "metadata") -> dict[str, str]:
    """Metadata as strings; a field is named by position (`metadata[#2]`), never by its
    key: the key is the record's own text and an error's field reaches logs."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput("wrong_type", field, f"expected object, got {type(value).__name__}")
    out: dict[str, str] = {}
    for i, (k, v) in enumerate(value.items()):
        where = f"{field}[#{i}]"
        out[check_identifier(_check_text(k, where), where)] = _scalar(v, where)
    return out


def _document(
    *, doc_id: str, op: str, text: str, title: str, source: str, kind: str, domain: str,
    event_time: float, ingest_time: float, metadata: dict[str, str],
    position: Position | None, acl: tuple[str, ...], shared_id: bool = False,
) -> Document:
    if op == "upsert" and blank(text):
        raise InvalidInput("empty_text", "text", "an upsert needs text that can be seen")
    if op == "delete":
        text, title, metadata, acl = "", "", {}, ()  # a delete removes every chunk, for all
    return Document(
        doc_id=doc_id, version=1, op=op, text=text, title=title, source=source,
        source_kind=kind, domain=domain or "default", event_time=event_time,
        ingest_time=ingest_time, metadata=metadata,
        content_hash=content_hash(op, text, title, domain, metadata, acl), position=position,
        shared_id=shared_id, acl=acl,
    )


def _from_plain(obj: dict[str, Any], msg: RawMessage, s: IngestSettings, now: float) -> Document:
    version = obj.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidInput("wrong_type", "schema_version",
                           f"expected an integer, got {type(version).__name__}")
    if version not in PLAIN_VERSIONS:
        raise InvalidInput("unknown_schema_version", "schema_version",
                           f"got {version}, ingest knows {sorted(PLAIN_VERSIONS)}")
    op = obj.get("op", "upsert")
    if not isinstance(op, str):
        raise InvalidInput("wrong_type", "op", f"expected string, got {type(op).__name__}")
    if op == "forget":
        return _forget(obj, msg, s, now)
    if op not in ("upsert", "delete"):
        raise InvalidInput("unknown_op", "op", "expected upsert, delete or forget")
    event_time = _event_time(obj.get("event_time"), "event_time", msg.timestamp, s)
    return _document(
        doc_id=_check_id(_str_field(obj, "id", required=True), "id", s),
        op=op,
        text=_check_text(_str_field(obj, "text", required=op == "upsert"), "text"),
        title=_check_text(_str_field(obj, "title", required=False), "title"),
        source=_check_source(_check_text(_str_field(obj, "source", required=True), "source")),
        kind="document",
        domain=check_identifier(
            _check_text(_str_field(obj, "domain", required=False), "domain"), "domain"),
        event_time=event_time,
        ingest_time=now,
        metadata=_metadata(obj.get("metadata")),
        position=plain_position(obj, _given(obj.get("event_time"), event_time)),
        acl=labels(obj.get("acl"), "acl", s) if op == "upsert" else (),
    )


def _forget(obj: dict[str, Any], msg: RawMessage, s: IngestSettings, now: float) -> Document:
    """A forget request (shared/contract/forget.py): a delete of the document at its next
    version carrying the request; dedup gives it the owner's source."""
    request_id = _check_text(_str_field(obj, "request_id", required=True), "request_id")
    by = _check_text(_str_field(obj, "requested_by", required=True), "requested_by")
    if not request_id.strip() or len(request_id) > 128:
        raise InvalidInput("invalid_field", "request_id", "1 to 128 characters")
    if len(by) > forget.MAX_BY:
        raise InvalidInput("invalid_field", "requested_by",
                           f"at most {forget.MAX_BY} characters")
    doc = _document(
        doc_id=_check_id(_str_field(obj, "id", required=True), "id", s), op="delete",
        text="", title="", source=FORGET_SOURCE, kind="document", domain="",
        event_time=_event_time(obj.get("event_time"), "event_time", msg.timestamp, s),
        ingest_time=now, metadata={}, position=None, acl=())
    marker = forget.request_marker(request_id, by)
    return doc.model_copy(update={"metadata": marker, "content_hash": content_hash(
        "delete", "", "", doc.domain, marker)})


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _mapped(obj: dict[str, Any], m: FieldMapping, prefix: str, s: IngestSettings,
            acl_path: str | None) -> dict[str, Any]:
    """Apply a field mapping; field names in errors are the mapped paths."""
    def get_str(path: str | None, required: bool, *, integer_ok: bool = False) -> str:
        if path is None:
            return ""
        value = _lookup(obj, path)
        full = f"{prefix}{path}"
        if value is None:
            if required:
                raise InvalidInput("missing_field", full)
            return ""
        if integer_ok and isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # numeric primary keys; digits are bounded by the raw scan
        if not isinstance(value, str):
            raise InvalidInput("wrong_type", full, f"expected string, got {type(value).__name__}")
        return _check_text(value, full)

    def get_meta(path: str) -> str:
        return _scalar(_lookup(obj, path), f"{prefix}{path}")

    meta = {k: get_meta(p) for k, p in m.metadata.items()}
    domain = get_str(m.domain, False)
    return dict(
        doc_id=get_str(m.id, True, integer_ok=True), text=get_str(m.text, False),
        title=get_str(m.title, False),
        domain=check_identifier(domain, f"{prefix}{m.domain}") if domain else m.default_domain,
        event_time_raw=_lookup(obj, m.event_time) if m.event_time else None,
        metadata={k: v for k, v in meta.items() if v},
        acl=labels(_lookup(obj, acl_path) if acl_path else None, f"{prefix}{acl_path}", s),
    )


def _from_cdc(obj: dict[str, Any], msg: RawMessage, s: IngestSettings,
              now: float) -> Document | TableTruncate:
    body = obj["payload"] if isinstance(obj.get("payload"), dict) else obj
    raw_op = body.get("op")
    if not isinstance(raw_op, str):
        raise InvalidInput("wrong_type", "op", f"expected string, got {type(raw_op).__name__}")
    if raw_op == "t":
        return _truncate(body, msg, s, now)
    op = CDC_OPS.get(raw_op)
    if op is None:
        raise InvalidInput("unknown_op", "op", "Debezium op must be c, u, d, r or t")
    db, table = _db_table(body, table_required=False)
    mapping = s.cdc_mappings.get(f"{db}.{table}") or s.cdc_mappings.get(table) \
        or s.cdc_mappings.get("*")
    if mapping is None:
        raise InvalidInput("unmapped_source", "source.table", f"no CDC mapping for {db}.{table}")
    row_name = "before" if op == "delete" else "after"
    row = body.get(row_name)
    if not isinstance(row, dict):
        raise InvalidInput("missing_field", row_name, f"op {raw_op} needs '{row_name}'")
    acl_column = CDC_ACL_COLUMN if mapping.acl is None else mapping.acl
    f = _mapped(row, mapping, f"{row_name}.", s, acl_column if op == "upsert" else None)
    ts = body.get("ts_ms")
    fallback = _event_time(ts, "ts_ms", msg.timestamp, s) if ts is not None else msg.timestamp
    event_time = _event_time(f["event_time_raw"], "event_time", fallback, s)
    table_name = f"{db}.{table}".lstrip(".")
    key = _check_id(f["doc_id"], f"{row_name}.{mapping.id}", s)
    space = table_name if mapping.id_space is None else mapping.id_space
    return _document(
        doc_id=_check_id(f"{space}/{key}" if space else key, f"{row_name}.{mapping.id}", s),
        op=op, shared_id=mapping.id_space is not None,
        text=f["text"], title=f["title"], source=f"cdc:{table_name}",
        kind="cdc", domain=f["domain"], event_time=event_time,
        ingest_time=now, metadata=f["metadata"], acl=f["acl"],
        position=cdc_position(body, _given(f["event_time_raw"], event_time)),
    )


def _db_table(body: dict[str, Any], *, table_required: bool) -> tuple[str, str]:
    """A Debezium envelope's source database and table, checked as identifiers."""
    source = body.get("source")
    src: dict[str, Any] = source if isinstance(source, dict) else {}
    names = []
    for name, required in (("db", False), ("table", table_required)):
        path = f"source.{name}"
        value = _check_text(_str_field(src, name, required=required, path=path), path)
        names.append(check_identifier(value, path))
    return names[0], names[1]


def _truncate(body: dict[str, Any], msg: RawMessage, s: IngestSettings,
              now: float) -> TableTruncate:
    if not s.apply_truncates:
        raise InvalidInput("truncate_refused", "op", "Debezium truncates are not applied "
                           "(STREAMRAG_INGEST_APPLY_TRUNCATES)")
    db, table = _db_table(body, table_required=True)
    ts = body.get("ts_ms")
    event_time = _event_time(ts, "ts_ms", msg.timestamp, s) if ts is not None else msg.timestamp
    return TableTruncate(source=f"cdc:{f'{db}.{table}'.lstrip('.')}", event_time=event_time,
                         ingest_time=now, position=cdc_position(body, _given(ts, event_time)))


def _from_api(obj: dict[str, Any], name: str, msg: RawMessage, s: IngestSettings,
              now: float) -> Document:
    mapping = s.api_mappings.get(name)
    if mapping is None:
        raise InvalidInput("unmapped_source", SOURCE_HEADER, f"no API mapping named {name!r}")
    deleted = obj.get("deleted") is True or obj.get("op") == "delete"
    f = _mapped(obj, mapping, "", s, None if deleted else mapping.acl)
    event_time = _event_time(f["event_time_raw"], mapping.event_time or "event_time",
                             msg.timestamp, s)
    return _document(
        doc_id=_check_id(f["doc_id"], mapping.id, s), op="delete" if deleted else "upsert",
        shared_id=mapping.id_space is not None,
        text=f["text"], title=f["title"], source=f"api:{name}", kind="api", domain=f["domain"],
        event_time=event_time, ingest_time=now, metadata=f["metadata"], acl=f["acl"],
        position=api_position(obj, mapping.version, _given(f["event_time_raw"], event_time)),
    )
