"""The real Redactor hands over what it masked, per document, as a person reads it: the
subject index's input, and nothing that prints it."""

from __future__ import annotations

import pytest

from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from services.redaction.subjects import Redacted
from shared.contract.records import Document
from shared.errors import InvalidInput


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def test_every_field_s_masked_values_come_back_with_their_types(redactor: Redactor) -> None:
    doc = Document(doc_id="d1", version=2, source="s", event_time=0, ingest_time=0,
                   title="Notes for ann.lee@example.com",
                   text="Please call +1 415 555 0132 or mail ANN.LEE@EXAMPLE.COM today.",
                   metadata={"owner": "bob.stone@example.org"})
    (out,) = redactor.redacted([doc])
    assert isinstance(out, Redacted)
    assert sorted((m.entity, m.value) for m in out.masked) == [
        ("EMAIL_ADDRESS", "ANN.LEE@EXAMPLE.COM"), ("EMAIL_ADDRESS", "ann.lee@example.com"),
        ("EMAIL_ADDRESS", "bob.stone@example.org"), ("PHONE_NUMBER", "+14155550132")]
    assert out.doc == redactor.redact_documents([doc])[0]  # the same redaction
    assert "example" not in repr(out) and "555" not in repr(out.masked)


def test_a_value_hidden_by_invisible_characters_comes_back_as_it_reads(redactor: Redactor,
                                                                      ) -> None:
    doc = Document(doc_id="d1", version=1, source="s", event_time=0, ingest_time=0,
                   text="Reach me at ann.\u200blee@exam\u00adple.com please.")
    (out,) = redactor.redact_found([doc])
    assert isinstance(out, Redacted)
    assert [(m.entity, m.value) for m in out.masked] == [("EMAIL_ADDRESS",
                                                         "ann.lee@example.com")]
    assert "\u200b" not in out.doc.text and "lee@" not in out.doc.text


def test_refused_labels_come_back_as_their_refusal(redactor: Redactor) -> None:
    doc = Document(doc_id="d1", version=1, source="s", event_time=0, ingest_time=0,
                   text="hello", acl=("eng", "tel:4155550132"))
    (out,) = redactor.redact_found([doc])
    assert isinstance(out, InvalidInput) and out.reason == "pii_in_acl"
