"""Access labels: the grammar that keeps free text out, and the one admission rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.contract.access import LABEL, MAX_LABELS, PUBLIC, Access, parse_acl
from shared.errors import InvalidInput

labels = st.from_regex(LABEL, fullmatch=True)


def test_a_comma_separated_string_and_a_list_give_the_same_sorted_unique_labels() -> None:
    assert parse_acl("payments, hr,payments") == ("hr", "payments")
    assert parse_acl(["payments", "hr"]) == ("hr", "payments")
    assert parse_acl("") == ()


@pytest.mark.parametrize("bad", [
    "alice@example.com", ["ok", 7], ["two words"], {"hr": 1}, 3, ["-leading"], ["x" * 129],
    ["new\nline"], ["zero\u200bwidth"]])
def test_anything_but_names_is_refused_without_quoting_it(bad: object) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_acl(bad)
    assert err.value.reason == "bad_acl"
    assert "example" not in err.value.detail and "alice" not in err.value.detail


def test_more_than_the_limit_of_labels_is_refused() -> None:
    with pytest.raises(InvalidInput):
        parse_acl([f"g{i}" for i in range(MAX_LABELS + 1)])


@given(st.lists(labels, max_size=6), st.sets(labels, max_size=6), st.none() | labels)
def test_admission_is_a_shared_label_or_public_or_all_access(
        acl: list[str], groups: set[str], subject: str | None) -> None:
    access = Access.of(subject, groups)
    wanted = bool(set(acl) & groups) or PUBLIC in acl or (
        subject is not None and f"user:{subject}" in acl)
    assert access.admits(acl) is wanted
    assert Access.everything().admits(acl) is True


def test_a_document_without_labels_is_read_only_with_all_access() -> None:
    assert not Access.of("alice", {"hr", "payments"}).admits(())
    assert Access.everything().admits(())


def test_scope_names_the_grants_and_differs_for_all_access() -> None:
    assert Access.of(None, {"b", "a"}).scope() == "a,b,public"
    assert Access.everything().scope() == "*"
