"""The query audit of one call: hashes instead of the question and the subject."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr, ValidationError

from services.inference.audit.record import query_audit, recorded_scope
from services.inference.audit.settings import QueryAuditSettings
from shared.contract.access import Access
from shared.contract.codec import encode
from shared.contract.query_audit import principal_hash

KEY = SecretStr("audit-key")


def test_the_subject_is_an_hmac_under_the_audit_key_and_nothing_without_one() -> None:
    expected = hmac.new(b"audit-key", b"alice@example.com", hashlib.sha256).hexdigest()
    assert principal_hash("alice@example.com", KEY) == "hmac-sha256:" + expected
    assert principal_hash("alice@example.com", SecretStr("other")) != "hmac-sha256:" + expected
    assert principal_hash("", KEY) == ""


def test_the_scope_keeps_groups_and_hashes_user_grants() -> None:
    scope = recorded_scope(Access.of("alice@example.com", ["eng", "ops"]), KEY)
    assert scope == ",".join(sorted(["eng", "ops", "public",
                                     "user:" + principal_hash("alice@example.com", KEY)]))
    assert recorded_scope(Access.everything(), KEY) == "*"
    assert recorded_scope(Access.of(None, ()), KEY) == "public"


@given(subject=st.emails(), question=st.text(min_size=12, max_size=200))
def test_neither_the_subject_nor_the_question_is_in_the_record(subject: str,
                                                               question: str) -> None:
    record = query_audit(query_id="q1", method="Query", question=question, subject=subject,
                         kind="user", access=Access.of(subject, ["eng"]), key=KEY, at=5.0,
                         shown=[("c1", "d1", 2), ("c2", "d9", 1)], cited=["c2"],
                         answer_mode="extractive", variant="base", config_version=3)
    wire = encode(record).decode("utf-8")
    assert subject not in wire and question not in wire
    assert record.question_sha256 == hashlib.sha256(question.encode("utf-8")).hexdigest()
    assert (record.shown, record.docs, record.cited) == (("c1", "c2"), ("d1@v2", "d9@v1"),
                                                         ("c2",))
    assert record.principal == principal_hash(subject, KEY) and record.principal_kind == "user"


def test_a_signing_key_that_is_no_key_fails_at_start_naming_it() -> None:
    with pytest.raises(ValidationError) as err:
        QueryAuditSettings(audit_signing_key=SecretStr("0x1234"))
    assert "audit_signing_key" in str(err.value)
    assert "0x1234" not in str(err.value)  # a secret is never echoed


def test_the_service_account_is_recorded_without_a_subject_and_a_user_named_service_with() -> None:
    """audit-trail.md: the principal is "" without a subject, the static service token
    included; its kind says who it was. A JWT whose sub is "service" is a user, hashed."""
    def audit(kind: str, access: Access) -> tuple[str, str, str]:
        r = query_audit(query_id="q", method="Retrieve", question="q?", subject="service",
                        kind=kind, access=access, key=KEY, at=1.0, shown=[], cited=[],
                        answer_mode="")
        return r.principal, r.principal_kind, r.scope
    assert audit("service", Access.everything()) == ("", "service", "*")
    assert audit("service", Access.of("service", ["ops"])) == (
        "", "service", ",".join(sorted(["ops", "public",
                                        "user:" + principal_hash("service", KEY)])))
    assert audit("user", Access.of("service", [])) == (
        principal_hash("service", KEY), "user",
        ",".join(sorted(["public", "user:" + principal_hash("service", KEY)])))
