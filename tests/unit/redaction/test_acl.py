"""Access labels at redaction: passed on unchanged, but read by the real analyser first; a
label hiding PII (phone, card, IBAN, IP address ...) refuses its document as pii_in_acl,
since rewriting a label would change who may read the document. Labels are hashed into the
audit leaf, so a proof shows who could read a version.

Generated values come from Faker in two slices, as scripts/benchlib/pii_generated.py keeps
them: `TUNING` (looked at while writing labels.py) and `HELD_OUT` (other locales and seed,
never looked at); both must pass."""

from __future__ import annotations

import hashlib
import json
import random
import re

import pytest
from faker import Faker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.audit.documents.verify import ident
from services.redaction.labels import label_views
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from shared.contract.access import LABEL
from shared.contract.audit_batches import content_sha256, document_sha256, leaf_for
from shared.contract.records import Document, RedactedDocument
from shared.errors import InvalidInput
from tests.support.hiding import HIDDEN, digit_forms

TUNING = (("en_US", "en_GB", "de_DE", "fr_FR", "en_IN"), 1)
HELD_OUT = (("es_ES", "it_IT", "nl_NL", "en_AU", "pt_PT", "fi_FI", "de_AT"), 4242)
CARDS = ("visa16", "mastercard", "amex", "discover", "jcb16", "diners", "maestro")
PREFIXES = ("user:", "tel:", "acct/", "grp-", "", "team.")
SEPARATORS = ("-", ".", "", "_", ":", "/")


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def doc(acl: tuple[str, ...], text: str = "Quarterly numbers are in.",
        doc_id: str = "d") -> Document:
    return Document(doc_id=doc_id, version=1, text=text, title="Report", source="s",
                    event_time=0, ingest_time=0, acl=acl)


def as_label(prefix: str, value: str, sep: str) -> str:
    """A value written into a label: every run of other characters becomes `sep`."""
    return prefix + re.sub(r"[^A-Za-z0-9]+", sep, value).strip(sep)


def generated(slice_: tuple[tuple[str, ...], int], per_locale: int = 12,
              ) -> list[tuple[str, str, str]]:
    """(kind, value, label) triples: phones, cards and IBANs written into labels."""
    locales, seed = slice_
    rnd = random.Random(seed)
    out = []
    for locale in locales:
        fake = Faker(locale)
        fake.seed_instance(seed)
        for _ in range(per_locale):
            kind = rnd.choice(["phone", "card", "iban"])
            if kind == "card":
                value = fake.credit_card_number(rnd.choice(CARDS))
            else:
                value = fake.phone_number() if kind == "phone" else fake.iban()
            label = as_label(rnd.choice(PREFIXES), value, rnd.choice(SEPARATORS))
            assert LABEL.fullmatch(label), label
            out.append((kind, value, label))
    return out


def refused_kinds(redactor: Redactor, label: str) -> InvalidInput | None:
    (result,) = redactor.label_refusals([doc((label,))])
    return result


@pytest.mark.parametrize("slice_", [TUNING, HELD_OUT], ids=["tuning", "held_out"])
def test_labels_hiding_generated_pii_are_refused(redactor: Redactor,
                                                 slice_: tuple[tuple[str, ...], int]) -> None:
    """Every card and IBAN is refused; a phone number whenever redaction masks the same
    digits in running text (a number Faker writes with a `+` loses it in a label, and some
    of those are no possible number without it), and that is nearly all of them."""
    cases = generated(slice_)
    texts = [f"Call me back on {re.sub(r'[^A-Za-z0-9]+', ' ', v).strip()} please."
             for _, v, _ in cases]
    masked = [bool(r.counts) for r in redactor.redact_texts(texts)]
    missed = []
    for (kind, value, label), in_text in zip(cases, masked, strict=True):
        result = refused_kinds(redactor, label)
        must = kind != "phone" or in_text
        if must and (result is None or result.reason != "pii_in_acl"):
            missed.append((kind, value, label))
    assert not missed, missed
    phones = [m for (k, _, _), m in zip(cases, masked, strict=True) if k == "phone"]
    assert len(phones) >= 10 and sum(phones) >= 0.8 * len(phones), phones


def test_the_brief_examples_are_refused_naming_the_type_never_the_label(
        redactor: Redactor) -> None:
    for label, kind in [("user:5551234567", "PHONE_NUMBER"), ("tel:020.7946.0958",
                        "PHONE_NUMBER"), ("acct/DE89370400440532013000", "IBAN_CODE"),
                        ("card-4111-1111-1111-1111", "CREDIT_CARD"),
                        ("host:10.0.4.17", "IP_ADDRESS")]:
        result = refused_kinds(redactor, label)
        assert result is not None and (result.reason, result.field) == ("pii_in_acl", "acl")
        assert kind in result.detail, (label, result.detail)
        digits = re.sub(r"\D", "", label)
        assert digits not in re.sub(r"\D", "", str(result)), str(result)


@pytest.mark.parametrize("slice_", [TUNING, HELD_OUT], ids=["tuning", "held_out"])
def test_ordinary_labels_pass_unchanged(redactor: Redactor,
                                        slice_: tuple[tuple[str, ...], int]) -> None:
    """Groups and principals are names, people's names included (`user:<subject>` names a
    principal on purpose): none of them is refused, and they come out as they went in."""
    locales, seed = slice_
    labels: set[str] = {"public", "payments", "eng", "team-42", "release-4.12.3",
                        "group:finance-emea", "user:alice.smith", "v2.4.1"}
    for locale in locales:
        fake = Faker(locale)
        fake.seed_instance(seed)
        for _ in range(6):
            labels.add(as_label("user:", fake.user_name(), "."))
            labels.add(as_label("", fake.job(), "-")[:60].strip("-").lower())
            labels.add(as_label("group:", fake.last_name(), "_").lower())
    acl = tuple(sorted(x for x in labels if LABEL.fullmatch(x)))
    assert len(acl) > 30
    batch = [doc(acl[i:i + 8], doc_id=f"d{i}") for i in range(0, len(acl), 8)]
    out = redactor.redact_isolated(batch)
    assert all(isinstance(r, RedactedDocument) for r in out), [r for r in out
                                                               if isinstance(r, Exception)]
    assert [r.acl for r in out if isinstance(r, RedactedDocument)] == [d.acl for d in batch]


def test_a_refused_document_fails_alone_and_the_others_are_redacted(
        redactor: Redactor) -> None:
    docs = [doc(("payments",), "Mail ann@example.com today.", "a"),
            doc(("payments", "user:5551234567"), "Nothing here.", "b"),
            doc(("eng",), "Fine.", "c")]
    out = redactor.redact_isolated(docs)
    assert isinstance(out[0], RedactedDocument) and isinstance(out[2], RedactedDocument)
    assert "ann@example.com" not in out[0].text and out[0].acl == ("payments",)
    assert isinstance(out[1], InvalidInput) and out[1].reason == "pii_in_acl"
    assert "5551234567" not in str(out[1])


@st.composite
def hidden_label(draw: st.DrawFn) -> str:
    """Digits in forms a reader reads as digits: no name, so ingest refuses them; a writer
    that skips ingest is refused here too."""
    digits = draw(st.text(alphabet="0123456789", min_size=7, max_size=11))
    body = "".join(draw(st.sampled_from(digit_forms(int(c))[1:])) +
                   "".join(draw(st.lists(st.sampled_from(HIDDEN), max_size=1)))
                   for c in digits)
    return "user:" + body


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hidden_label())
def test_a_label_outside_the_grammar_is_refused_as_bad_acl(redactor: Redactor,
                                                           label: str) -> None:
    (result,) = redactor.label_refusals([doc(("eng", label))])
    assert result is not None and (result.reason, result.field) == ("bad_acl", "acl")


def test_views_read_separators_as_spaces() -> None:
    assert label_views("payments") == ["payments"]
    assert label_views("tel:020.7946.0958") == ["tel:020.7946.0958", "tel 020 7946 0958",
                                                "phone tel 020 7946 0958"]
    assert label_views("team-42") == ["team-42", "team 42"]


# -- audit ----------------------------------------------------------------------------------

def test_the_leaf_hashes_cover_the_labels() -> None:
    raw = doc(("eng", "payments"))
    red = RedactedDocument(**raw.model_dump())
    revoked = red.model_copy(update={"acl": ("eng",)})
    leaf = leaf_for(raw, red, 3)
    assert leaf.redacted_sha256 == document_sha256(red) != document_sha256(revoked)
    assert leaf.raw_sha256 == document_sha256(raw)
    assert ident(red)[2] == leaf.redacted_sha256 != ident(revoked)[2]  # verify sees a change


def test_without_labels_the_leaf_hash_is_the_one_before_labels() -> None:
    red = RedactedDocument(**doc(()).model_dump())
    assert document_sha256(red) == content_sha256(red.title, red.text, red.metadata)
    old = json.dumps([red.title, red.text, []], ensure_ascii=False)
    assert document_sha256(red) == hashlib.sha256(old.encode()).hexdigest()
