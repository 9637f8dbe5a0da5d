"""Which retrieved chunks an answer cites, and whether its sentences are grounded in them.

Both answer paths end here. An extractive answer quotes sentences and marks each "[n]", so
its markers are its citations. A generative answer's markers are the model's own claim:
a marker naming a passage the model was never shown is flagged (`unknown_markers`), and an
answer that names none although passages were given is flagged `uncited`. Small instruct
models rarely write markers at all (SmolLM2-135M wrote one correct "[n]" in 25 tries), so
an uncited answer's citations are attributed instead: each sentence to the passage that
holds the largest share of its words, if that share reaches SUPPORT (`cited_by` says
which way the citations were found).

`supported_share` is the faithfulness signal on every answer: the share of the answer's
sentences whose content words are at least SUPPORT covered by one cited chunk. Word
overlap rather than an entailment model because no NLI model is installable here; it
credits a sentence copied or closely paraphrased from a passage and fails one that adds
facts the passage does not hold, which is the failure that matters in a small model.

Pure: no model, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MARKER = re.compile(r"\[(\d{1,3})\]")
_WORD = re.compile(r"[^\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
SUPPORT = 0.5  # share of a sentence's content words found in one passage
_STOPS = ("a an and are as at be been but by can could did do does for from had has have how "
          "i if in into is it its of on or so such than that the their them then there these "
          "they this those to was were what when where which while who why will with would you "
          "your not no yes also only about after before over under more most some any each "
          "other")
STOP_WORDS = frozenset(_STOPS.split())


@dataclass(frozen=True)
class CitationCheck:
    cited_ids: tuple[str, ...]  # first mention first
    cited_by: str  # "quoted" (extractive), "model" (its markers), "overlap" or "none"
    uncited: bool  # passages were given and the model's text names none of them
    unknown_markers: tuple[int, ...]  # "[n]" naming no passage the model was shown
    supported_share: float  # answer sentences grounded in a cited chunk (1.0: no sentence)


def content_words(text: str) -> set[str]:
    return {w for w in (m.group().lower() for m in _WORD.finditer(text)) if w not in STOP_WORDS}


def sentences(answer: str) -> list[str]:
    """The answer's sentences without their markers, those with no content word left out."""
    parts = (MARKER.sub("", p).strip() for p in _SENTENCE.split(answer))
    return [p for p in parts if content_words(p)]


def coverage(sentence: str, passage: str) -> float:
    """The share of `sentence`'s content words that `passage` holds."""
    return _covered(content_words(sentence), content_words(passage))


def _covered(words: set[str], passage: set[str]) -> float:
    return len(words & passage) / len(words) if words else 0.0


def marked(answer: str, chunk_ids: Sequence[str], shown: Sequence[int] | None = None,
           ) -> tuple[list[str], list[int]]:
    """The chunk ids the "[n]" markers name (first mention first) and the unknown n.

    `shown` are the 1-based numbers of the passages the model saw (all when None)."""
    allowed = set(shown) if shown is not None else set(range(1, len(chunk_ids) + 1))
    ids: list[str] = []
    unknown: list[int] = []
    for match in MARKER.finditer(answer):
        n = int(match.group(1))
        if n in allowed and 1 <= n <= len(chunk_ids):
            if chunk_ids[n - 1] not in ids:
                ids.append(chunk_ids[n - 1])
        elif n not in unknown:
            unknown.append(n)
    return ids, unknown


def check_quoted(answer: str, chunk_ids: Sequence[str], texts: Sequence[str],
                 ) -> CitationCheck:
    """An extractive answer: its markers are its citations."""
    ids, unknown = marked(answer, chunk_ids)
    return CitationCheck(tuple(ids), "quoted", bool(chunk_ids) and not ids, tuple(unknown),
                         supported(answer, ids, chunk_ids, texts))


def check_generated(answer: str, chunk_ids: Sequence[str], texts: Sequence[str],
                    shown: Sequence[int]) -> CitationCheck:
    """A generative answer over the passages numbered `shown` (1-based into chunk_ids)."""
    ids, unknown = marked(answer, chunk_ids, shown)
    uncited = bool(shown) and not ids
    cited_by = "model"
    if not ids:
        ids = attribute(answer, chunk_ids, texts, shown)
        cited_by = "overlap" if ids else "none"
    return CitationCheck(tuple(ids), cited_by, uncited, tuple(unknown),
                         supported(answer, ids, chunk_ids, texts))


def attribute(answer: str, chunk_ids: Sequence[str], texts: Sequence[str],
              shown: Sequence[int]) -> list[str]:
    """Each sentence's best-covering shown passage, when it covers at least SUPPORT."""
    passages = {n: content_words(texts[n - 1]) for n in shown}  # each passage read once
    ids: list[str] = []
    for sentence in sentences(answer):
        words = content_words(sentence)
        best = max(shown, key=lambda n: _covered(words, passages[n]), default=None)
        if (best is not None and _covered(words, passages[best]) >= SUPPORT
                and chunk_ids[best - 1] not in ids):
            ids.append(chunk_ids[best - 1])
    return ids


def supported(answer: str, cited: Sequence[str], chunk_ids: Sequence[str],
              texts: Sequence[str]) -> float:
    """The share of the answer's sentences at least SUPPORT covered by one cited chunk."""
    said = sentences(answer)
    if not said:
        return 1.0
    by_id = dict(zip(chunk_ids, texts, strict=True))
    passages = [content_words(by_id[c]) for c in cited if c in by_id]
    grounded = sum(1 for s in said
                   if any(_covered(content_words(s), p) >= SUPPORT for p in passages))
    return grounded / len(said)
