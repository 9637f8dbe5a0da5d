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


def cpf_ok(digits: str) -> bool:
    """Brazil's CPF: 11 digits, two mod-11 check digits, not all one digit."""
    if len(digits) != 11 or len(set(digits)) == 1:
        return False
    d = [int(c) for c in digits]
    return all(sum(d[i] * (n + 1 - i) for i in range(n)) * 10 % 11 % 10 == d[n]
               for n in (9, 10))


def cnpj_ok(digits: str) -> bool:
    """Brazil's CNPJ: 14 digits, two mod-11 check digits (weights 2-9 from the right)."""
    if len(digits) != 14 or len(set(digits)) == 1:
        return False
    d = [int(c) for c in digits]
    for n in (12, 13):
        weights = [(n - 1 - i) % 8 + 2 for i in range(n)]
        r = sum(x * w for x, w in zip(d[:n], weights, strict=True)) % 11
        if (0 if r < 2 else 11 - r) != d[n]:
            return False
    return True


_VERHOEFF_D = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
    [2, 3, 4, 0, 1, 7, 8, 9, 5, 6], [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
    [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
    [8, 7, 6, 5, 9, 3, 2, 1, 0, 4], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]]
_VERHOEFF_P = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
    [5, 8, 0, 3, 7, 9, 6, 1, 4, 2], [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
    [9, 4, 5, 3, 1, 2, 6, 8, 7, 0], [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
    [2, 7, 9, 3, 8, 0, 6, 4, 1, 5], [7, 0, 4, 6, 9, 1, 3, 2, 5, 8]]


def verhoeff_ok(digits: str) -> bool:
    """The Verhoeff check (India's Aadhaar numbers carry it)."""
    c = 0
    for i, ch in enumerate(reversed(digits)):
        c = _VERHOEFF_D[c][_VERHOEFF_P[i % 8][ord(ch) - 48]]
    return c == 0


def aadhaar_ok(digits: str) -> bool:
    """India's Aadhaar: 12 digits, the first 2-9, Verhoeff check digit."""
    return len(digits) == 12 and digits[0] not in "01" and verhoeff_ok(digits)


_RIC_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def prc_resident_id_ok(value: str) -> bool:
    """China's resident identity number: 17 digits and an ISO 7064 MOD 11-2 check (0-9/X),
    with a birth date in positions 7-14."""
    if len(value) != 18 or not value[:17].isdigit() or not _date_ok(value[6:14]):
        return False
    total = sum(int(c) * w for c, w in zip(value[:17], _RIC_WEIGHTS, strict=True))
    return "10X98765432"[total % 11] == value[17].upper()


def korean_rrn_ok(digits: str, checksum: bool = True) -> bool:
    """Korea's resident registration number: a birth date (YYMMDD), a sex/century digit
    and six more; those issued before October 2020 end in a check digit (`checksum`)."""
    if len(digits) != 13 or not digits.isdigit() or digits[6] not in "12345678":
        return False
    century = "19" if digits[6] in "1256" else "20"
    if not _date_ok(century + digits[:6]):
        return False
    if not checksum:
        return True
    weights = (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)
    total = sum(int(c) * w for c, w in zip(digits[:12], weights, strict=True))
    return (11 - total % 11) % 10 == int(digits[12])


def steuer_id_ok(digits: str) -> bool:
    """Germany's tax identification number (Steuer-ID): 11 digits, no leading 0, in the
    first ten one digit twice or three times, and an ISO 7064 MOD 11,10 check digit."""
    if len(digits) != 11 or not digits.isdigit() or digits[0] == "0":
        return False
    counts = sorted((digits[:10].count(c) for c in set(digits[:10])), reverse=True)
    if counts[0] not in (2, 3) or (len(counts) > 1 and counts[1] > 1):
        return False
    product = 10
    for ch in digits[:10]:
        total = (int(ch) + product) % 10 or 10
        product = total * 2 % 11
    return (11 - product) % 10 == int(digits[10])


def ssn_ok(digits: str) -> bool:
    """A US social security number the SSA could have issued: 9 digits, the area not 000,
    666 or 900-999, the group not 00, the serial not 0000."""
    if len(digits) != 9 or not digits.isdigit():
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area < "900" and group != "00" and serial != "0000"


def _date_ok(yyyymmdd: str) -> bool:
    import datetime
    try:
        datetime.date(int(yyyymmdd[:4]), int(yyyymmdd[4:6]), int(yyyymmdd[6:8]))
    except ValueError:
        return False
    return True
