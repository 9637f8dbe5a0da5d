"""Consistent, non-reversible pseudonyms: <TYPE:hmac> with a keyed HMAC-SHA256 of the value."""

from __future__ import annotations

import hashlib
import hmac
import re

# Written many ways, meaning one value: only letters and digits count for these.
_FORMATTED = frozenset({"PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN"})
_NOT_ALNUM = re.compile(r"[\W_]+")


def normalise(entity: str, value: str) -> str:
    """The form that is hashed: case and spacing never split one value into two tokens."""
    text = " ".join(value.split()).casefold()
    return _NOT_ALNUM.sub("", text) if entity in _FORMATTED else text


def pseudonym(key: bytes, entity: str, value: str, hex_chars: int = 8) -> str:
    """The same (key, entity, value) always gives the same token; without the key, no way back.

    A short token is a label, not a secret: with 8 hex characters two values share a token
    with probability about n^2 / 2^33 among n distinct values of one type.
    """
    message = f"{entity}\x00{normalise(entity, value)}".encode()
    return f"<{entity}:{hmac.new(key, message, hashlib.sha256).hexdigest()[:hex_chars]}>"
