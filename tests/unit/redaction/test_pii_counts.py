"""PII entities found per source, domain and type in one redaction batch."""

from __future__ import annotations

from services.redaction.pii_counts import pii_counts
from shared.contract.records import RedactedDocument


def red(source: str, domain: str, **found: int) -> RedactedDocument:
    return RedactedDocument(doc_id="d", version=1, source=source, domain=domain, text="x",
                            event_time=1.0, ingest_time=1.0, entity_counts=found)


def test_counts_are_summed_per_source_and_domain_and_empty_ones_left_out() -> None:
    batch = [red("crm", "sales", EMAIL_ADDRESS=2, PERSON=1), red("crm", "sales", PERSON=3),
             red("wiki", "eng"), red("wiki", "eng", PHONE_NUMBER=0)]
    out = pii_counts(batch, now=7.0)
    assert [(c.source, c.domain, c.counts, c.at) for c in out] == [
        ("crm", "sales", {"pii.EMAIL_ADDRESS": 2, "pii.PERSON": 4}, 7.0)]
