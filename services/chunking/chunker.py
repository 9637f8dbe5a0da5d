"""Token-budgeted chunking that cuts at the strongest boundary that fits.

Chunks are contiguous slices of the text (their cores), so joining the cores gives the
text back. Boundary strength: paragraph > line > JSON member > sentence > clause > word.
Nothing is cut inside a fenced code block, a pipe table, a list item or a JSON object
unless that unit alone exceeds the budget; then it is split along its own lines or
members, nested units that fit still kept whole. With overlap, each chunk also carries
up to `overlap` tokens of the text before its core, starting at the strongest boundary.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Sequence

from services.chunking.structure import FENCE, Span, json_member_cuts, json_objects, units

__all__ = ["FENCE", "chunk_id", "chunk_layout", "chunk_spans", "split"]

# Each pattern's match END is a cut position; earlier patterns are stronger.
PARAGRAPH, LINE = re.compile(r"\n[ \t]*\n\s*"), re.compile(r"\n")
SENTENCE, CLAUSE = re.compile(r"[.!?][\"')\]]*\s+"), re.compile(r"[;:,]\s+")
WORD = re.compile(r"\s+")

Offsets = Sequence[tuple[int, int]]


def token_starts(offsets: Offsets) -> list[int]:
    return [start for start, end in offsets if end > start]


def cut_levels(text: str, kept: list[Span]) -> list[list[int]]:
    """Cut positions outside the `kept` units, per boundary strength, strongest first."""
    levels = [[m.end() for m in p.finditer(text)] for p in (PARAGRAPH, LINE)]
    levels.append(json_member_cuts(text, json_objects(text)))
    levels += [[m.end() for m in p.finditer(text)] for p in (SENTENCE, CLAUSE, WORD)]
    return [[c for c in level if not _inside(kept, c)] for level in levels]


def chunk_spans(text: str, offsets: Offsets, max_tokens: int) -> list[Span]:
    """Character spans covering `text`, each holding at most `max_tokens` tokens.

    `offsets` are the tokenizer's (start, end) character offsets for `text`.
    """
    return [(a, b) for _, a, b in chunk_layout(text, offsets, max_tokens)]


def chunk_layout(text: str, offsets: Offsets, max_tokens: int,
                 overlap: int = 0) -> list[tuple[int, int, int]]:
    """(text start, core start, end) per chunk; core + overlap stays within `max_tokens`.

    Cores tile the text; each chunk's text also repeats up to `overlap` tokens before its
    core, starting at the strongest boundary in that window.
    """
    starts = token_starts(offsets)
    budget = max_tokens - overlap
    kept = _forbidden(text, starts, budget)
    levels = cut_levels(text, kept)
    spans: list[Span] = []
    pos = 0
    while pos < len(text):
        first = bisect.bisect_left(starts, pos)
        if first + budget >= len(starts):
            spans.append((pos, len(text)))
            break
        limit = starts[first + budget]  # the first token that does not fit starts here
        end = _best_cut(levels, pos, limit) or _unit_start(kept, pos, limit) or limit
        spans.append((pos, end))
        pos = end
    return [(_overlap_start(a, starts, levels, overlap), a, b) for a, b in spans]


def _overlap_start(a: int, starts: list[int], levels: list[list[int]], overlap: int) -> int:
    first = bisect.bisect_left(starts, a)
    if not overlap or not first:
        return a
    lo = starts[max(0, first - overlap)]
    return min(_first_cut(levels, lo, a), a)


def _first_cut(levels: list[list[int]], lo: int, hi: int) -> int:
    """The earliest cut in [lo, hi) at the strongest level that has one; else lo."""
    for cuts in levels:
        i = bisect.bisect_left(cuts, lo)
        if i < len(cuts) and cuts[i] < hi:
            return cuts[i]
    return lo


def _forbidden(text: str, starts: list[int], max_tokens: int) -> list[Span]:
    """Merged spans of the units that fit the budget: no cut may fall strictly inside."""
    fitting = sorted((a, b) for a, b in units(text)
                     if bisect.bisect_left(starts, b) - bisect.bisect_left(starts, a) <= max_tokens)
    merged: list[Span] = []
    for a, b in fitting:
        if merged and a < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def _inside(spans: list[Span], pos: int) -> bool:
    i = bisect.bisect_left(spans, (pos, pos)) - 1
    return i >= 0 and spans[i][0] < pos < spans[i][1]


def _unit_start(spans: list[Span], pos: int, limit: int) -> int | None:
    """The start of a whole unit that the token limit would cut, if it starts after pos."""
    i = bisect.bisect_left(spans, (limit, limit)) - 1
    return spans[i][0] if i >= 0 and pos < spans[i][0] < limit < spans[i][1] else None


def _best_cut(levels: list[list[int]], pos: int, limit: int) -> int | None:
    for cuts in levels:
        i = bisect.bisect_right(cuts, limit) - 1
        if i >= 0 and cuts[i] > pos:
            return cuts[i]
    return None  # no boundary fits (one huge unit)


def chunk_id(doc_id: str, version: int, ordinal: int, text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return f"{doc_id}#v{version}#{ordinal}#{digest}"


def split(text: str, tokenize: Callable[[str], Offsets], max_tokens: int) -> list[str]:
    return [text[a:b] for a, b in chunk_spans(text, tokenize(text), max_tokens)]
