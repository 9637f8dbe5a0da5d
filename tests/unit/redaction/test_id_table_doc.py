"""docs/design/redaction.md lists the national ids shared/text/id_catalogue.py serves."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from shared.text.id_catalogue import CATALOGUE
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "design" / "redaction.md"


def load_generator() -> ModuleType:
    return load_script("gen_id_table")


def test_the_page_lists_the_catalogue() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page == load_generator().render(page), \
        "docs/design/redaction.md's id table is out of date: run scripts/gen_id_table"


def test_every_row_appears_once_with_whether_it_needs_a_cue() -> None:
    page = PAGE.read_text(encoding="utf-8")
    for row in CATALOGUE:
        lines = [line for line in page.splitlines() if f"| `{row.entity}` |" in line]
        assert len(lines) == 1, row.entity
        assert ("needs a cue" in lines[0]) == row.needs_cue, row.entity
