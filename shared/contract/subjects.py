"""Subject keys: who a document mentions, as a keyed hash that never holds the value.

Redaction writes, per redacted document version, the keys of the entities it masked
(records.SubjectIndex on pii.subjects.v1); `streamrag subjects VALUE` computes the key of
a value it is given and finds the versions that hold it. A key is
HMAC-SHA256(subject key, kind + "\\x00" + normalised value): without the key nothing can be
tested; with it, any guess can, so the key is a secret. Normalisation makes one person's
value match however it was written: an e-mail casefolded, a phone number as E.164, an
identifier's letters and digits only, a name casefolded with its spacing collapsed.
"""

from __future__ import annotations

import re
from typing import Literal

import phonenumbers
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC

from shared.text.id_catalogue import CATALOGUE_ENTITIES

Kind = Literal["email", "phone", "name", "id"]
KINDS: tuple[Kind, ...] = ("email", "phone", "name", "id")
# The masked entity types that name a person, by the kind they are indexed as. Others
# (locations, addresses of machines, secrets, undecodable blobs) are not indexed: a
# secret's HMAC under a shared key would let anyone with the key test a guess of it.
ENTITY_KINDS: dict[str, Kind] = {
    "EMAIL_ADDRESS": "email", "PHONE_NUMBER": "phone", "PERSON": "name",
    **{entity: "id" for entity in ("US_SSN", "CREDIT_CARD", "IBAN_CODE", "BR_CPF", "BR_CNPJ",
                                   "IN_AADHAAR", "CN_RESIDENT_ID", "KR_RRN", "DE_TAX_ID",
                                   "RU_PASSPORT", *CATALOGUE_ENTITIES)},
}
# Regions whose national-format phone numbers are read (the first that reads a number as
# valid gives its E.164 form); the redaction setting STREAMRAG_REDACTION_PHONE_REGIONS.
PHONE_REGIONS: tuple[str, ...] = ("US", "CA", "GB", "IE", "DE", "AT", "CH", "FR", "BE", "NL",
                                  "ES", "IT", "PT", "DK", "SE", "NO", "FI", "PL", "CZ", "IN",
                                  "AU", "NZ", "BR", "CN", "JP", "KR", "RU", "SA", "AE", "EG")
# Public, so that the embedded mesh runs with no setup: anything real sets its own.
DEV_SUBJECT_KEY = "streamrag-dev-subject-key-set-one-for-anything-real"
_NOT_ALNUM = re.compile(r"[\W_]+")
_NOT_DIGIT = re.compile(r"\D+")


def phone_forms(value: str, regions: tuple[str, ...] = PHONE_REGIONS,
                first: bool = False) -> list[str]:
    """Every E.164 form the number may have, the likeliest first: its own country code if
    written with one, else each region (in order) that reads it as a valid number; its
    digits alone when none does. `first`: the likeliest only (what is indexed; each region
    tried costs a parse, and a document may hold many numbers)."""
    forms: list[str] = []
    for region in (None, *regions):
        try:
            number = phonenumbers.parse(value, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            form = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
            if form not in forms:
                forms.append(form)
            if first:
                break
        if region is None:
            break  # a country code of its own decides: no region reads it otherwise
    return forms or [_NOT_DIGIT.sub("", value)]


def normalised(kind: Kind, value: str, regions: tuple[str, ...] = PHONE_REGIONS) -> str:
    """The one form of `value` that is keyed."""
    if kind == "email":
        return "".join(value.split()).casefold()
    if kind == "phone":
        return phone_forms(value, regions, first=True)[0]
    if kind == "id":
        return _NOT_ALNUM.sub("", value).upper()
    return " ".join(value.split()).casefold()


def subject_key(key: bytes, kind: Kind, form: str) -> str:
    """HMAC-SHA256 of kind + NUL + an already normalised form, in hex."""
    mac = HMAC(key, hashes.SHA256())
    mac.update(f"{kind}\x00{form}".encode())
    return mac.finalize().hex()


def key_of(key: bytes, kind: Kind, value: str, regions: tuple[str, ...] = PHONE_REGIONS,
           ) -> str:
    """The key redaction indexes a masked value of this kind under."""
    return subject_key(key, kind, normalised(kind, value, regions))


def keys_to_find(key: bytes, kind: Kind, value: str,
                 regions: tuple[str, ...] = PHONE_REGIONS) -> set[str]:
    """Every key a document mentioning `value` may hold: a phone number asked for in a
    national format may have been written with its country code, or read under another
    region, so each of its forms is tried."""
    forms = phone_forms(value, regions) if kind == "phone" else [normalised(kind, value)]
    return {subject_key(key, kind, form) for form in forms}


def key_id(key: bytes) -> str:
    """A short public name of the key (not the key): records written under another key
    are told apart from records that do not mention a value."""
    return subject_key(key, "id", "\x00streamrag subject key id")[:16]
