"""The extractive answer: sentence splitting, ranking by cosine, citations and limits."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from services.inference.answer.extractive import (
    Sentence,
    answer_pieces,
    apply_limits,
    candidate_sentences,
    select_sentences,
    split_sentences,
)


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_split_sentences_drops_fragments_and_joins_lines() -> None:
    text = "The broker restarted at noon. Why?\nAll consumers\nrejoined quickly!  Ok."
    assert split_sentences(text) == ["The broker restarted at noon.",
                                     "All consumers rejoined quickly!"]


def test_candidates_keep_citation_numbers_and_drop_repeats() -> None:
    texts = ["Disk usage hit ninety percent. Alerts fired on time.",
             "Alerts fired on time. The on-call engineer rotated logs."]
    assert candidate_sentences(texts) == [
        Sentence("Disk usage hit ninety percent.", 1), Sentence("Alerts fired on time.", 1),
        Sentence("The on-call engineer rotated logs.", 2)]
    assert len(candidate_sentences(texts, limit=2)) == 2


def test_select_ranks_by_cosine_best_first() -> None:
    query = unit(1, 0, 0)
    vectors = np.stack([unit(1, 0, 1.4), unit(1, 1, 0), unit(1, 0.1, 0), unit(1, 0.5, 0)])
    assert select_sentences(query, vectors, 2) == [2, 3]
    assert select_sentences(query, vectors, 10) == [2, 3, 1, 0]


def test_select_drops_off_topic_rows_rather_than_pad() -> None:
    query = unit(1, 0, 0)
    vectors = np.stack([unit(0, 1, 0), unit(1, 0.2, 0), unit(1, 1.8, 0), unit(-1, 0, 0)])
    # cosines: 0, 0.98, 0.49, -1; the floor is half the best (0.49)
    assert select_sentences(query, vectors, 10) == [1]
    assert select_sentences(query, vectors[[0, 3]], 10) == [0]  # the best always stays


def test_select_skips_near_duplicates_and_handles_empty() -> None:
    query = unit(1, 0, 0)
    vectors = np.stack([unit(1, 0.01, 0), unit(1, 0.02, 0), unit(1, 1, 0)])
    assert select_sentences(query, vectors, 2) == [0, 2]
    assert select_sentences(query, np.zeros((0, 3), dtype=np.float32), 3) == []
    assert select_sentences(query, vectors, 0) == []


def test_another_sources_sentence_must_reach_the_top_ranked_chunks_best() -> None:
    query = unit(1, 0, 0)
    # cosines 0.9 (source 2), 0.8 (source 1, the top-ranked chunk), 0.7 (source 1),
    # 0.75 (source 3)
    vectors = np.stack([unit(0.9, np.sqrt(0.19), 0), unit(0.8, -0.6, 0),
                        unit(0.7, 0, np.sqrt(0.51)), unit(0.75, 0, -np.sqrt(1 - 0.5625))])
    sources = [2, 1, 1, 3]
    assert select_sentences(query, vectors, 4) == [0, 1, 3, 2]  # any source
    # Source 2's 0.9 beats the top-ranked chunk's best (0.8): quoted, first; source 3's
    # 0.75 does not: left out; source 1's own sentences always stand.
    assert select_sentences(query, vectors, 4, sources) == [0, 1, 2]
    assert select_sentences(query, vectors, 4, sources, other_source_floor=0.9) == [0, 1, 3, 2]
    assert select_sentences(query, vectors, 4, sources, other_source_floor=1.2) == [1, 2]


def test_ties_keep_citation_order() -> None:
    vectors = np.stack([unit(0, 1, 0), unit(0, 0, 1), unit(0, 1, 1)])
    assert select_sentences(unit(0, 1, 1), vectors, 3) == [2, 0, 1]


def test_pieces_cite_their_chunk() -> None:
    pieces = answer_pieces([Sentence("B happened.", 2), Sentence("A happened.", 1)])
    assert pieces == ["B happened. [2]", " A happened. [1]"]


def test_limits_cut_at_stop_sequence_and_word_cap() -> None:
    pieces = ["One two three. [1]", " Four five. [2]", " Six. [3]"]
    assert apply_limits(pieces, (), 0) == (pieces, "stop")
    assert apply_limits(pieces, ("five",), 0) == (["One two three. [1]", " Four "], "stop")
    assert apply_limits(pieces, ("[2]",), 0) == (["One two three. [1]", " Four five. "], "stop")
    assert apply_limits(pieces, (), 5) == (["One two three. [1]", " Four"], "length")
    assert apply_limits(pieces, ("three",), 5) == (["One two "], "stop")
    assert apply_limits(pieces, (), 9) == (pieces, "stop")  # citation markers count as words
    assert apply_limits(pieces, (), 8) == ([*pieces[:2], " Six."], "length")


@given(st.lists(st.text(min_size=1, max_size=30), max_size=6),
       st.lists(st.text(min_size=1, max_size=4), max_size=3), st.integers(0, 20))
def test_limits_keep_a_prefix_within_the_caps(
    pieces: list[str], stop: list[str], max_words: int,
) -> None:
    kept, reason = apply_limits(pieces, stop, max_words)
    full, text = "".join(pieces), "".join(kept)
    assert full.startswith(text)
    assert all(s not in text for s in stop)
    if max_words:
        assert len(text.split()) <= max_words
    assert reason in ("stop", "length")
    assert all(kept) and len(kept) <= len(pieces)
