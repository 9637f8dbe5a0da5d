"""Values written in an encoding: base64 or hex that decodes to text, and blobs that do not.

A person does not read base64, but a system that logs `aGk6IGFubmFAZXhhbXBsZS5jb20=` has
written an e-mail address all the same. `payloads` finds the tokens of a text that decode
(standard or URL-safe base64, hex) to printable UTF-8 text, so that the decoded text can be
analysed and the whole token masked when it holds personal data. What does not decode to
text (compressed, encrypted or binary data) cannot be read here: `blobs` names the
high-entropy base64 tokens among those so that they are flagged rather than passed
silently. Hex digests (commit ids, checksums) and UUIDs are identifiers, never blobs.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter

_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{12,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:[0-9a-fA-F]{2}){8,}(?![0-9A-Za-z])")
MIN_TEXT = 6  # decoded characters: shorter decodings are chance
MIN_BLOB = 32
BLOB_ENTROPY = 4.2  # bits per character; random base64 of 32+ characters has about 4.7-5.3
# A slug or path of words ("payments-ingest-worker-7d9f8"): no blob.
_WORDS = re.compile(r"^[A-Za-z0-9]{1,12}(?:[-_/][A-Za-z0-9]{1,12})+$")


def payloads(text: str) -> list[tuple[int, int, str]]:
    """(start, end, decoded text) of every token that decodes to printable text."""
    out = []
    for m in _HEX.finditer(text):
        decoded = _text(bytes.fromhex(m.group()))
        if decoded is not None:
            out.append((m.start(), m.end(), decoded))
    hexes = {(a, b) for a, b, _ in out}
    for m in _B64.finditer(text):
        token = m.group()
        if (m.start(), m.end()) in hexes or not _mixed(token):
            continue
        decoded = _b64_any(token)
        if decoded is not None:
            out.append((m.start(), m.end(), decoded))
    return sorted(out)


def blobs(text: str) -> list[tuple[int, int]]:
    """(start, end) of base64 tokens of 32+ characters with high entropy that decode to no
    text: data that cannot be checked for personal data here."""
    out = []
    for m in _B64.finditer(text):
        token = m.group().rstrip("=")
        if (len(token) < MIN_BLOB or not _mixed(token) or _WORDS.match(token)
                or re.fullmatch(r"[0-9a-fA-F-]+", token)):
            continue
        if not (any(c.isdigit() for c in token) and any(c.isupper() for c in token)
                and any(c.islower() for c in token)):
            continue
        if entropy(token) >= BLOB_ENTROPY and _b64_any(m.group()) is None:
            out.append((m.start(), m.end()))
    return out


def entropy(token: str) -> float:
    """Shannon entropy of the token's characters, in bits per character."""
    n = len(token)
    return -sum(k / n * math.log2(k / n) for k in Counter(token).values())


def _mixed(token: str) -> bool:
    """Base64 of text mixes cases or digits; a plain word does not."""
    return any(c.isupper() for c in token[1:]) or any(c.isdigit() for c in token) or \
        any(c in "+/" for c in token)


def _b64_any(token: str) -> str | None:
    """The text the token decodes to, whole or after a prefix (`doc-`, `id_`)."""
    decoded = _b64_text(token)
    if decoded is not None:
        return decoded
    for cut in re.finditer(r"[-_]", token):
        rest = token[cut.end():]
        if len(rest) < 12:
            break
        decoded = _b64_text(rest)
        if decoded is not None:
            return decoded
    return None


def _b64_text(token: str) -> str | None:
    body = token.rstrip("=")
    if len(body) % 4 == 1:
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = (base64.urlsafe_b64decode(padded) if ("-" in body or "_" in body)
               else base64.b64decode(padded, validate=True))
    except (binascii.Error, ValueError):
        return None
    return _text(raw)


def _text(raw: bytes) -> str | None:
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(decoded) < MIN_TEXT or not all(c.isprintable() or c in "\n\t\r" for c in decoded):
        return None
    return decoded if any(c.isalnum() for c in decoded) else None
