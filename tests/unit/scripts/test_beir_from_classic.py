"""scripts/beir_from_classic on tiny hand-written collections in each format's quirks."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "beir_from_classic"


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("beir_from_classic", str(SCRIPT))
    spec = importlib.util.spec_from_loader("beir_from_classic", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["beir_from_classic"] = module  # dataclasses look their module up
    loader.exec_module(module)
    return module


conv = load_script()

CRAN_DOCS = """\
.I 1
.T
wing flutter
at speed .
.A
smith
.B
j. ae. 1950
.W
wing flutter at speed .
a study of   flutter.
.I 2
.T
.A
.B
.W
.I 003
.T
heat transfer
.W
heat transfer in slabs .
"""
# cran.qry's ids have gaps; cranqrel numbers the queries by position.
CRAN_QUERIES = """\
.I 001
.W
what causes
flutter .
.I 004
.W
heat in slabs .
"""
CRAN_QRELS = "1 1 1\n1 3 4\n2 3 2 \n2 1 -1\n"


def write(tmp: Path, **files: str) -> dict[str, Path]:
    out = {}
    for name, text in files.items():
        (tmp / name).write_text(text)
        out[name] = tmp / name
    return out


def read_out(out: Path) -> tuple[list[dict], list[dict], list[str]]:
    docs = [json.loads(x) for x in (out / "corpus.jsonl").read_text().splitlines()]
    qs = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    return docs, qs, (out / "qrels/test.tsv").read_text().splitlines()


def test_cranfield_fields_positions_and_grades(tmp_path: Path) -> None:
    f = write(tmp_path, docs=CRAN_DOCS, qry=CRAN_QUERIES, rel=CRAN_QRELS)
    counts = conv.convert("cranfield", f["docs"], f["qry"], f["rel"], tmp_path / "out")
    docs, qs, rels = read_out(tmp_path / "out")
    assert docs == [
        {"_id": "1", "title": "wing flutter at speed .",
         "text": "wing flutter at speed . a study of flutter."},
        {"_id": "2", "title": "", "text": ""},
        {"_id": "3", "title": "heat transfer", "text": "heat transfer in slabs ."},
    ]
    assert qs == [{"_id": "1", "text": "what causes flutter ."},
                  {"_id": "2", "text": "heat in slabs ."}]
    # Cleverdon's code 1 (complete answer) gains most; -1 (no interest) is judged, gains 0.
    assert rels == ["query-id\tcorpus-id\tscore", "1\t1\t4", "1\t3\t1", "2\t3\t3", "2\t1\t0"]
    assert counts == {"docs": 3, "docs_without_text": 1, "queries": 2, "queries_left_out": 0,
                      "judged_queries": 2, "qrels": 4, "relevant_pairs": 3}


def test_cisi_style_extra_fields_and_binary_judgements(tmp_path: Path) -> None:
    docs = (".I 1\n.T \nDewey Decimal\n.A \nComaromi, J.P.\n.W\n   The present study\n"
            "of the DDC.\n.K \nclassification\n.X\n1\t5\t1\n92\t1\t1\n"
            ".I 2\n.T\nLibraries\n.W\nUse made of libraries.\n.X\n2\t2\t2\n")
    qry = (".I 1\n.W\nWhat is the DDC?\n.I 2\n.T\nA paper title\n.A\nSmith\n.W\n"
           "Libraries and their use.\n.B\n(source)\n")
    rel = "     1     1\t0\t0.000000\n     2     2\t0\t0.000000\n     2     1\t0\t0.000000\n"
    f = write(tmp_path, docs=docs, qry=qry, rel=rel)
    conv.convert("cisi", f["docs"], f["qry"], f["rel"], tmp_path / "out")
    got_docs, qs, rels = read_out(tmp_path / "out")
    assert got_docs[0] == {"_id": "1", "title": "Dewey Decimal",
                           "text": "The present study of the DDC."}
    assert qs[1] == {"_id": "2", "text": "Libraries and their use."}
    assert rels[1:] == ["1\t1\t1", "2\t2\t1", "2\t1\t1"]


def test_cacm_trailing_empty_query_left_out_and_zero_padded_ids(tmp_path: Path) -> None:
    docs = (".I 1\n.T\nAlgebraic Language\n.B\nCACM 1958\n.A\nPerlis, A. J.\n.N\nCA581203\n"
            ".X\n100\t5\t1\n.I 2\n.T\nRoots\n.W\nExtraction of roots.\n.B\nCACM\n")
    qry = ".I 1\n.W\n articles on TSS\n.N\n 1. R. Alexander\n \n.I 0\n"
    rel = "01 2  0 0\n01 1  0 0\n01 2  0 0\n"
    f = write(tmp_path, docs=docs, qry=qry, rel=rel)
    counts = conv.convert("cacm", f["docs"], f["qry"], f["rel"], tmp_path / "out")
    got_docs, qs, rels = read_out(tmp_path / "out")
    assert got_docs[0] == {"_id": "1", "title": "Algebraic Language", "text": ""}
    assert qs == [{"_id": "1", "text": "articles on TSS"}]
    assert rels[1:] == ["1\t2\t1", "1\t1\t1"]  # the repeated pair once
    assert counts["queries_left_out"] == 1 and counts["docs_without_text"] == 1


def test_a_judgement_naming_an_unknown_document_is_an_error(tmp_path: Path) -> None:
    f = write(tmp_path, docs=".I 1\n.W\nx\n", qry=".I 1\n.W\ny\n", rel="1 7 0 0\n")
    with pytest.raises(ValueError, match="unknown ids"):
        conv.convert("cisi", f["docs"], f["qry"], f["rel"], tmp_path / "out")


def test_unknown_cranfield_code_is_an_error() -> None:
    with pytest.raises(ValueError, match="code 7"):
        conv.cranfield_score(7)
