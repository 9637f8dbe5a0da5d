"""shared.text.visible: the view a reader sees, and its map back to the original characters."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.text.visible import blank, reading_view
from tests.support.hiding import HIDDEN, ODD_SPACES, digit_forms


@st.composite
def hidden_number(draw: st.DrawFn, digits: str) -> str:
    """`digits` (groups of four) written so that a person still reads the number."""
    out = []
    for i, ch in enumerate(digits):
        if i and i % 4 == 0:
            out.append(draw(st.sampled_from([" ", "-", " | ", *ODD_SPACES, "\u2011", "\n",
                                             "  "])))
        out.append(draw(st.sampled_from(digit_forms(int(ch)))))
        out.append("".join(draw(st.lists(st.sampled_from(HIDDEN), max_size=2))))
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.from_regex(r"[0-9]{16}", fullmatch=True))
def test_a_hidden_number_reads_as_its_digits_and_maps_back_to_all_of_it(
        data: st.DataObject, digits: str) -> None:
    hidden = data.draw(hidden_number(digits))
    text = f"card: {hidden} thanks"
    view = reading_view(text)
    found = re.search(r"\d[\d -]*\d", view.text)
    assert found is not None
    assert re.sub(r"\D", "", found.group()) == digits
    start, end = view.span(*found.span())
    # The original span holds every character of the hidden number, nothing around it.
    assert text[start:end] == hidden
    assert text[:start] == "card: " and text[end:].lstrip("".join(HIDDEN)) == " thanks"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii", exclude_categories=["Cc"])))
def test_ascii_without_joined_digits_is_its_own_view(text: str) -> None:
    view = reading_view(text)
    if not re.search(r"\d(?:[ \t]*\|[ \t]*|[ \t]{2,}|[Ool I])\d", text):
        assert view.text == text and view.identical


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_every_view_character_maps_inside_the_text_in_order(text: str) -> None:
    view = reading_view(text)
    spans = [view.span(i, i + 1) for i in range(len(view.text))]
    assert all(0 <= a < b <= len(text) for a, b in spans)
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)


def test_the_findings_of_the_issue_read_plainly() -> None:
    cases = {
        "4111\u200b1111\u200b1111\u200b1111": "4111111111111111",
        "4\u00ad111-1111-1111-1111": "4111-1111-1111-1111",
        "\u200e4111\u200f 1111": "4111 1111",
        "\U0001d7d2\U0001d7cf\U0001d7cf\U0001d7cf": "4111",
        "| 4111 | 1111 | 1111 | 1111 |": "| 4111 1111 1111 1111 |",
        "DE89\u200b3704\u200b0044": "DE8937040044",
        "anna\uff20example.com": "anna@example.com",
        "4\u0332111": "4111",
        "41O1 1l11": "4101 1111",
    }
    for hidden, read in cases.items():
        assert reading_view(hidden).text == read


def test_words_keep_their_marks_and_scripts() -> None:
    for text in ("café", "Zoë Ångström", "नमस्ते दुनिया", "東京の天気"):
        assert reading_view(text).text == text


def test_blank_is_true_only_for_text_nothing_of_which_shows() -> None:
    assert blank("\u200b\ufeff\u2800 \t\n\U000e0041\u3164\u2060")
    assert blank("")
    assert not blank("\u200ba")
    assert not blank("\u2800.")
