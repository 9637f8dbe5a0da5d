"""Card numbers: every published issuer range, every length, any separator, Luhn-checked."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.benchlib.pii_corpus import luhn_check_digit
from services.redaction.cards import ISSUER_RANGES, CardRecognizer, find_cards

REC = CardRecognizer()


def luhn_complete(body: str) -> str:
    return body + luhn_check_digit(body)


def number_in(rng: random.Random, low: str, high: str, length: int) -> str:
    prefix = str(rng.randint(int(low), int(high))).zfill(len(low))
    rest = "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    return luhn_complete(prefix + rest)


def grouped(digits: str, sep: str, size: int = 4) -> str:
    return sep.join(digits[i:i + size] for i in range(0, len(digits), size))


def found(text: str) -> list[tuple[int, int]]:
    return [(r.start, r.end) for r in REC.analyze(text, ["CREDIT_CARD"])]


def test_every_range_edge_and_length_is_found_with_every_separator() -> None:
    rng = random.Random(20261130)
    checked = 0
    for issuer in ISSUER_RANGES:
        for length in issuer.lengths:
            for edge in (issuer.low, issuer.high):
                digits = number_in(rng, edge, edge, length)
                for sep in ("", " ", "-", "."):
                    value = grouped(digits, sep)
                    text = f"Refund to {value} today."
                    assert found(text) == [(10, 10 + len(value))], (issuer, value)
                    checked += 1
    assert checked > 500


def test_inside_longer_tokens_and_next_to_punctuation() -> None:
    digits = number_in(random.Random(1), "2221", "2720", 16)
    for text, start in ((f"card:{digits}", 5), (f"cc={digits};", 3), (f"(x{digits})", 2),
                        (f"pan_{digits}_end", 4)):
        assert found(text) == [(start, start + 16)], text


def test_a_wrong_check_digit_or_an_unissued_prefix_is_not_a_card() -> None:
    good = number_in(random.Random(2), "51", "55", 16)
    bad_check = good[:-1] + str((int(good[-1]) + 1) % 10)
    unissued = luhn_complete("1" + good[1:-1])  # no network issues numbers starting with 1
    assert found(f"card {good}") and not found(f"card {bad_check}")
    assert not found(f"card {unissued}")


def test_a_card_followed_by_other_numbers_is_still_found() -> None:
    digits = number_in(random.Random(3), "4", "4", 16)
    text = f"paid {grouped(digits, ' ')} 2026 1130"
    assert found(text) == [(5, 5 + 19)]


def test_numbers_that_are_not_cards_are_left_alone() -> None:
    for text in ("10.0.4.17", "2026-11-28 14:05", "release 4.12.3", "port 8443",
                 "4 12 33 5 100 2000 123", "order 7741-2209", "build 20261128"):
        assert found(text) == [], text


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ISSUER_RANGES), st.data(), st.sampled_from(["", " ", "-", "."]),
       st.text(alphabet="abc :=#(", max_size=6), st.text(alphabet="abc :=#)", max_size=6))
def test_any_number_in_any_range_is_found_whole(issuer, data, sep, left, right) -> None:
    length = data.draw(st.sampled_from(issuer.lengths))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    digits = number_in(rng, issuer.low, issuer.high, length)
    value = grouped(digits, sep)
    text = f"{left}{value}{right}"
    assert (len(left), len(left) + len(value)) in found(text)
    assert [start for start, _, _ in find_cards(text)] == [len(left)]


def test_digits_inside_a_hex_digest_are_no_card() -> None:
    # 638948037574a... holds 12+ digits that pass Luhn inside a git commit id
    for digest in ("2f5bee638948037574a60c43bbcdb6984cd4d452",
                   "9f" + "4111111111111111" + "ab" * 7 + "c"):
        assert found(f"rollback to {digest} started") == [], digest
    assert found("card 4111111111111111abc") == [(5, 21)]  # a short tail is no digest
