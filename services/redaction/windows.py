"""Bounded analysis windows for long texts, and merging what each window found.

A window ends at whitespace where it can, and the next one starts `overlap` characters
before that end, so any entity no longer than the overlap lies wholly inside some window.
"""

from __future__ import annotations

from collections.abc import Iterable

from presidio_analyzer import RecognizerResult

Window = tuple[int, int]


def _snap_back(text: str, pos: int, floor: int) -> int:
    """The position just after the last whitespace in text[floor:pos], else pos."""
    for i in range(pos - 1, floor - 1, -1):
        if text[i].isspace():
            return i + 1
    return pos


def windows(text: str, size: int, overlap: int) -> list[Window]:
    """(start, end) windows of at most `size` characters covering `text`."""
    if overlap * 2 >= size:
        raise ValueError(f"overlap {overlap} must be under half the window size {size}")
    slack = min(64, size // 8)  # how far a cut may move back to land on whitespace
    out: list[Window] = []
    start = 0
    while True:
        end = min(start + size, len(text))
        if end < len(text):
            end = _snap_back(text, end, end - slack)
        out.append((start, end))
        if end >= len(text):
            return out
        # Moving a start back only widens the overlap, so the guarantee holds.
        start = _snap_back(text, end - overlap, end - overlap - slack)


def shifted(results: Iterable[RecognizerResult], offset: int) -> list[RecognizerResult]:
    return [RecognizerResult(r.entity_type, r.start + offset, r.end + offset, r.score,
                             r.analysis_explanation, r.recognition_metadata) for r in results]


def merge(results: Iterable[RecognizerResult]) -> list[RecognizerResult]:
    """Non-overlapping spans covering every character any result covered.

    Overlapping results become one span typed by the highest score (then the longest):
    for redaction a masked character must never be unmasked by a conflict rule.
    """
    out: list[RecognizerResult] = []
    best: list[RecognizerResult] = []
    for r in sorted(results, key=lambda r: (r.start, -r.end)):
        if out and r.start < out[-1].end:
            last = out[-1]
            if (r.score, r.end - r.start) > (best[-1].score, best[-1].end - best[-1].start):
                best[-1] = r
            out[-1] = RecognizerResult(best[-1].entity_type, last.start, max(last.end, r.end),
                                       max(last.score, r.score), best[-1].analysis_explanation,
                                       best[-1].recognition_metadata)
        else:
            out.append(r)
            best.append(r)
    return out
