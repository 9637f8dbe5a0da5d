"""The faithfulness benchmark's judged set: a fixed tune/held-out split and claims asked."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.benchlib.answer import SLICES, as_question, load, slice_of


def beir(root: Path, queries: int) -> Path:
    """A BEIR collection: query q<i> judged to match abstract d<i>."""
    (root / "qrels").mkdir(parents=True)
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{i}", "text": f"claim {i}"}) + "\n" for i in range(queries)))
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": f"d{i}", "title": f"t{i}", "text": f"abstract {i}"}) + "\n"
        for i in range(queries * 2)))
    (root / "qrels/train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(queries)))
    return root


def test_the_split_depends_on_the_id_alone_and_halves_the_queries() -> None:
    ids = [f"{n}" for n in range(2000)]
    first = [slice_of(q) for q in ids]
    assert first == [slice_of(q) for q in ids]
    assert set(first) == set(SLICES)
    assert 900 < first.count("held-out") < 1100
    # Pinned: a change of hash would silently move questions into the tuning slice.
    assert [slice_of(q) for q in ("1", "2", "3", "4")] == ["held-out", "tune", "tune",
                                                          "held-out"]


def test_the_slices_load_disjoint_questions_whatever_the_seed(tmp_path: Path) -> None:
    root = beir(tmp_path, 60)
    held, _ = load(root, 100, 5, seed=1, part="held-out")
    tune, _ = load(root, 100, 5, seed=2, part="tune")
    held_ids, tune_ids = {q for q, _, _ in held}, {q for q, _, _ in tune}
    assert held_ids and tune_ids and not held_ids & tune_ids
    assert held_ids | tune_ids == {f"q{i}" for i in range(60)}
    assert all(slice_of(q) == "held-out" for q in held_ids)
    fewer, pool = load(root, 10, 5, seed=1, part="held-out")
    assert len(fewer) == 10 and {q for q, _, _ in fewer} <= held_ids
    assert all(rel == {"d" + q[1:]} and rel <= set(pool) for q, _, rel in fewer)


def test_a_claim_is_asked_as_a_yes_no_question() -> None:
    assert as_question("Vitamin D deficiency affects birth weight.") == (
        "Is it true that vitamin D deficiency affects birth weight?")
    assert as_question("ALDH1 expression predicts poor outcome.") == (
        "Is it true that ALDH1 expression predicts poor outcome?")
    assert as_question("p53 is mutated in most tumours") == (
        "Is it true that p53 is mutated in most tumours?")
