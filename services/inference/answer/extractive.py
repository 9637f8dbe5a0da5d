"""The extractive answer: the retrieved sentences closest to the question, each cited "[n]".

No generative model can be downloaded here, so the embedded default quotes instead of
writing: it ranks the chunks' sentences by cosine with the query vector. Pure functions;
the caller embeds the candidate sentences with the query's encoder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ANSWER_MODE = "extractive"
MAX_CANDIDATES = 64  # sentences embedded per query: bounds the answer step's CPU time
MIN_SENTENCE_CHARS = 12  # shorter fragments ("Fig. 2", list bullets) make poor answers
NEAR_DUPLICATE = 0.95  # cosine above which two picked sentences say the same thing
# A sentence scoring under this share of the best one is off-topic: a shorter answer beats
# one padded to `n` sentences with whatever else the chunks held.
RELATIVE_FLOOR = 0.5
# A sentence of another source than the top-ranked chunk's must score at least this share
# of that chunk's best sentence: an answer that quotes the postmortem retrieval ranked first
# should not go on with the refund policy of another document that merely shares its words
# ("payments", "outage"); a sentence of another chunk that beats the first chunk's is quoted.
# Chosen on the tune slice of scifact (scripts/bench_answer --slice tune), reported on the
# held-out one.
OTHER_SOURCE_FLOOR = 1.0
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[-*•])")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Sentence:
    text: str
    citation: int  # 1-based place of its chunk in the citation list


def split_sentences(text: str) -> list[str]:
    parts = (" ".join(p.split()) for p in _BOUNDARY.split(text))
    return [p for p in parts if len(p) >= MIN_SENTENCE_CHARS]


def candidate_sentences(texts: Sequence[str], limit: int = MAX_CANDIDATES) -> list[Sentence]:
    """The chunks' sentences in citation order, exact repeats dropped, at most `limit`."""
    seen: set[str] = set()
    out: list[Sentence] = []
    for number, text in enumerate(texts, start=1):
        for sentence in split_sentences(text):
            if sentence.casefold() in seen:
                continue
            seen.add(sentence.casefold())
            out.append(Sentence(sentence, number))
            if len(out) == limit:
                return out
    return out


def select_sentences(query: np.ndarray, vectors: np.ndarray, n: int,
                     sources: Sequence[int] | None = None,
                     other_source_floor: float = OTHER_SOURCE_FLOOR) -> list[int]:
    """Rows of `vectors` most cosine-similar to `query`, best first.

    Near-duplicates of a picked row and rows under RELATIVE_FLOOR of the best are skipped;
    with `sources` (each row's citation number: 1 is the top-ranked chunk), so are rows of
    another source than the top-ranked one present under `other_source_floor` of its best
    row.
    """
    if n <= 0 or len(vectors) == 0:
        return []
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    scores = unit @ (query / max(float(np.linalg.norm(query)), 1e-12))
    picked: list[int] = []
    floor = RELATIVE_FLOOR * float(scores.max())
    lead = min(sources) if sources is not None else 0
    anchor = max(float(scores[i]) for i, src in enumerate(sources or ()) if src == lead) \
        if sources is not None else 0.0
    for i in np.argsort(-scores, kind="stable"):  # stable: ties keep citation order
        if scores[i] < floor:
            break
        if sources is not None and sources[i] != lead and scores[i] < other_source_floor * anchor:
            continue
        if all(float(unit[i] @ unit[j]) < NEAR_DUPLICATE for j in picked):
            picked.append(int(i))
            if len(picked) == n:
                break
    return picked


def answer_pieces(sentences: Sequence[Sentence]) -> list[str]:
    """The answer as text deltas: each sentence with its citation marker."""
    return [("" if i == 0 else " ") + f"{s.text} [{s.citation}]" for i, s in enumerate(sentences)]


def apply_limits(
    pieces: Sequence[str], stop: Sequence[str], max_words: int,
) -> tuple[list[str], str]:
    """Cut the deltas at the first stop sequence or after `max_words` words (0: no cap).

    Returns the kept deltas and the finish reason: "length" when the word cap cut the
    answer, "stop" otherwise (its natural end or a stop sequence).
    """
    full = "".join(pieces)
    cut, reason = len(full), "stop"
    for s in stop:
        at = full.find(s)
        if at >= 0:
            cut = min(cut, at)
    words = list(_WORD.finditer(full))
    if max_words and len(words) > max_words and words[max_words - 1].end() < cut:
        cut, reason = words[max_words - 1].end(), "length"
    kept: list[str] = []
    start = 0
    for piece in pieces:
        if start >= cut:
            break
        kept.append(piece[: cut - start])
        start += len(piece)
    return [k for k in kept if k], reason


def word_count(texts: Sequence[str]) -> int:
    return sum(len(_WORD.findall(t)) for t in texts)
