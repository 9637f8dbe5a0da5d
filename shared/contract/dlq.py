"""Dead-letter records: a rejected record's stage, reason, field and origin, then move on."""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from typing import Any, TypeVar

from prometheus_client import Counter

from shared.contract.codec import decode, encode
from shared.contract.records import DeadLetter, Record
from shared.errors import InvalidInput

R = TypeVar("R", bound=Record)

log = logging.getLogger(__name__)
MAX_KEPT_PAYLOAD = 256 * 1024
# A key longer than this is kept as its first KEPT_KEY_PREFIX bytes and its hash: the dead
# letter of a record with a 700 KB key must still fit under the broker's record limit.
MAX_KEPT_KEY = 1024
KEPT_KEY_PREFIX = 64
DEAD_LETTERED = Counter("streamrag_records_dead_lettered", "Records sent to a dead-letter topic",
                        ["stage", "reason"])


def build_dead_letter(
    stage: str, exc: InvalidInput, *, topic: str, partition: int, offset: int,
    key: bytes | None, payload: bytes | None, keep_payload: bool,
) -> DeadLetter:
    """The dead-letter record for one rejected message.

    Past redaction (`keep_payload=False`) only a hash of the payload is kept, so a
    dead-letter topic never becomes a side door for raw PII.
    """
    body = payload or b""
    kept = None
    if keep_payload and len(body) <= MAX_KEPT_PAYLOAD:
        kept = base64.b64encode(body).decode("ascii")
    return DeadLetter(
        stage=stage, reason=exc.reason, field=exc.field, detail=exc.detail[:500],
        source_topic=topic, partition=partition, offset=offset,
        key=bounded_key(key).decode("utf-8", "replace") if key is not None else None,
        key_sha256=hashlib.sha256(key).hexdigest() if key is not None else None,
        key_size=len(key) if key is not None else 0,
        payload_sha256=hashlib.sha256(body).hexdigest(), payload_size=len(body),
        payload_b64=kept, at=time.time(),
    )


def bounded_key(key: bytes) -> bytes:
    """`key` itself when short; else its first bytes, an ellipsis and its SHA-256."""
    if len(key) <= MAX_KEPT_KEY:
        return key
    digest = hashlib.sha256(key).hexdigest().encode()
    return key[:KEPT_KEY_PREFIX] + b"...sha256:" + digest


async def send_dead_letter(
    dlq_topic: Any, stage: str, exc: InvalidInput, message: Any, *, keep_payload: bool = False,
) -> DeadLetter:
    """Send the dead letter for a Faust `message` (its topic, partition, offset) to `dlq_topic`."""
    record = build_dead_letter(
        stage, exc, topic=message.topic, partition=message.partition, offset=message.offset,
        key=message.key, payload=message.value, keep_payload=keep_payload,
    )
    log.warning("dead-lettered %s/%s@%s: %s field=%s", message.topic, message.partition,
                message.offset, exc.reason, exc.field)
    key = bounded_key(message.key) if message.key is not None else None
    await dlq_topic.send(key=key, value=encode(record))
    DEAD_LETTERED.labels(stage, exc.reason).inc()
    return record


async def decode_or_dead_letter(cls: type[R], event: Any, dlq_topic: Any, stage: str) -> R | None:
    """The `cls` record a Faust event carries, or None once it is dead-lettered (hash only)."""
    try:
        return decode(cls, event.message.value)
    except InvalidInput as exc:
        await send_dead_letter(dlq_topic, stage, exc, event.message)
        return None
