"""Check digits of the personal numbers the mesh looks for, shared by redaction (which masks
them in text) and ingest (which refuses them in identifiers): one definition of each."""

from __future__ import annotations

import re

# An IBAN as printed: country, check digits, then 11-30 letters or digits, compact or in
# groups of four, not inside a longer token.
IBAN_CANDIDATE = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}(?![A-Za-z0-9])")


def luhn_ok(digits: str) -> bool:
    """The Luhn check every payment card number passes (`digits`: ASCII digits only)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = (ord(ch) - 48) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def iban_ok(value: str) -> bool:
    """ISO 13616: 15-34 characters (spaces aside) whose mod-97 check gives 1."""
    compact = value.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
