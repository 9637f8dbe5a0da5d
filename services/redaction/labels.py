"""Access labels read for personal data: a label is passed on as it is, never rewritten
(that would change who may read the document), so one that hides PII refuses its document.

Labels are names by grammar (shared.contract.access), so an e-mail address cannot be one,
but digits can: a phone number, card or IBAN may sit in a label such as `user:5551234567`
or `acct/DE89370400440532013000`. Each label is read twice, as written and with its name
separators (`. _ : / -`) as spaces, the way such a value is usually printed (and a third
time after a phone cue when it holds a long run of digits).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from shared.contract.access import parse_acl
from shared.contract.records import Document
from shared.errors import InvalidInput
from shared.text.id_catalogue import CATALOGUE_ENTITIES

SEPARATORS = re.compile(r"[._:/-]+")
LONG_DIGITS = re.compile(r"\d{7,}|\d+(?: \d+){2,}")
# What a label may not hold. Not PERSON or LOCATION: `user:<subject>` names a principal on
# purpose, and a group name ("berlin-office") is no one's personal data.
ACL_ENTITIES = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN",
                "IP_ADDRESS", "CRYPTO", "SECRET", "BR_CPF", "BR_CNPJ", "IN_AADHAAR",
                "CN_RESIDENT_ID", "KR_RRN", "DE_TAX_ID", "RU_PASSPORT", *CATALOGUE_ENTITIES)


def label_views(label: str) -> list[str]:
    """The texts one label is analysed as. A label holding a long digit run is read once
    more after a phone cue: in running text digits alone are a phone only after one (an
    order number looks the same), but a label has no room for an order number's words."""
    spaced = SEPARATORS.sub(" ", label).strip()
    views = [label] if spaced == label else [label, spaced]
    if LONG_DIGITS.search(spaced):
        views.append(f"phone {spaced}")
    return views


def checked(doc: Document) -> list[str]:
    """The texts a document's labels are analysed as; InvalidInput(bad_acl) for labels
    outside the grammar (ingest refuses those, so only a foreign writer sends them)."""
    parse_acl(list(doc.acl), "acl")
    return [view for label in doc.acl for view in label_views(label)]


def refusal(entities: Sequence[str]) -> InvalidInput:
    """The dead letter of a document whose labels hold PII; it names the entity types
    found, never a label (its text is the very thing that must not travel on)."""
    kinds = ", ".join(sorted(set(entities)))
    return InvalidInput("pii_in_acl", "acl", f"a label holds {kinds}; labels are passed on "
                        "as written, so the document is refused")
