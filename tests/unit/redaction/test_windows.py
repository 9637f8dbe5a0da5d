"""Analysis windows cover every short span whole; merged findings never unmask a character."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from presidio_analyzer import RecognizerResult

from services.redaction.windows import merge, windows


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="ab \n", max_size=3000), size=st.integers(100, 700),
       overlap_frac=st.floats(0.0, 0.49))
def test_windows_bound_cover_and_hold_every_short_span(text: str, size: int,
                                                       overlap_frac: float) -> None:
    overlap = int(size * overlap_frac)
    ws = windows(text, size, overlap)
    assert ws[0][0] == 0 and ws[-1][1] == len(text)
    assert all(0 < b - a <= size or (a, b) == (0, 0) for a, b in ws)
    assert all(b1 >= a2 for (_, b1), (a2, _) in zip(ws, ws[1:], strict=False))  # no gaps
    assert all(a2 > a1 for (a1, _), (a2, _) in zip(ws, ws[1:], strict=False))  # progress
    for start in range(0, len(text) - overlap + 1, 7):
        end = start + overlap
        assert any(a <= start and end <= b for a, b in ws), (start, end, ws)


def test_window_edges_land_on_whitespace_when_they_can() -> None:
    text = " ".join(f"word{i:04d}" for i in range(500))
    for a, b in windows(text, 1000, 100)[:-1]:
        assert text[b - 1] == " " and (a == 0 or text[a - 1] == " ")


def test_overlap_must_leave_progress() -> None:
    try:
        windows("x" * 50, 100, 50)
    except ValueError as exc:
        assert "half" in str(exc)
    else:
        raise AssertionError("an overlap of half the window was accepted")


def r(entity: str, start: int, end: int, score: float) -> RecognizerResult:
    return RecognizerResult(entity, start, end, score)


def test_merge_unions_overlaps_and_types_by_best_score() -> None:
    merged = merge([r("PHONE_NUMBER", 5, 13, 0.4), r("CREDIT_CARD", 0, 19, 1.0),
                    r("PERSON", 30, 40, 0.85), r("PERSON", 35, 48, 0.85),
                    r("LOCATION", 50, 56, 0.85)])
    assert [(m.entity_type, m.start, m.end) for m in merged] == [
        ("CREDIT_CARD", 0, 19), ("PERSON", 30, 48), ("LOCATION", 50, 56)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 30), st.floats(0, 1),
                          st.sampled_from(["A", "B"])), max_size=25))
def test_merge_masks_exactly_the_union_without_overlaps(spans: list) -> None:
    results = [r(e, s, s + n, score) for s, n, score, e in spans]
    merged = merge(results)
    covered = {i for x in results for i in range(x.start, x.end)}
    assert {i for m in merged for i in range(m.start, m.end)} == covered
    assert all(a.end <= b.start for a, b in zip(merged, merged[1:], strict=False))
