"""Token-budgeted chunking that cuts at the strongest boundary that fits.

Chunks are contiguous slices of the text, so joining them gives the text back.
Boundary strength: paragraph > line > sentence > clause > word; nothing is cut
inside a fenced code block unless the block alone exceeds the budget.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Sequence

# Each pattern's match END is a cut position; earlier patterns are stronger.
BOUNDARIES = (
    re.compile(r"\n[ \t]*\n\s*"),  # paragraph
    re.compile(r"\n"),  # line
    re.compile(r"[.!?][\"')\]]*\s+"),  # sentence
    re.compile(r"[;:,]\s+"),  # clause
    re.compile(r"\s+"),  # word
)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)

Offsets = Sequence[tuple[int, int]]


def token_starts(offsets: Offsets) -> list[int]:
    return [start for start, end in offsets if end > start]


def chunk_spans(text: str, offsets: Offsets, max_tokens: int) -> list[tuple[int, int]]:
    """Character spans covering `text`, each holding at most `max_tokens` tokens.

    `offsets` are the tokenizer's (start, end) character offsets for `text`.
    """
    starts = token_starts(offsets)
    fences = [m.span() for m in FENCE.finditer(text)]
    cuts_by_strength = [_cuts(p, text, fences) for p in BOUNDARIES]
    spans: list[tuple[int, int]] = []
    pos = 0
    while pos < len(text):
        first = bisect.bisect_left(starts, pos)
        if first + max_tokens >= len(starts):
            spans.append((pos, len(text)))
            break
        limit = starts[first + max_tokens]  # the first token that does not fit starts here
        end = _best_cut(cuts_by_strength, pos, limit)
        spans.append((pos, end))
        pos = end
    return spans


def _cuts(pattern: re.Pattern[str], text: str, fences: list[tuple[int, int]]) -> list[int]:
    ends = (m.end() for m in pattern.finditer(text))
    return [e for e in ends if not any(a < e < b for a, b in fences)]


def _best_cut(cuts_by_strength: list[list[int]], pos: int, limit: int) -> int:
    for cuts in cuts_by_strength:
        i = bisect.bisect_right(cuts, limit) - 1
        if i >= 0 and cuts[i] > pos:
            return cuts[i]
    return limit  # no boundary fits (one huge unit): cut at a token boundary


def chunk_id(doc_id: str, version: int, ordinal: int, text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return f"{doc_id}#v{version}#{ordinal}#{digest}"


def split(text: str, tokenize: Callable[[str], Offsets], max_tokens: int) -> list[str]:
    return [text[a:b] for a, b in chunk_spans(text, tokenize(text), max_tokens)]
