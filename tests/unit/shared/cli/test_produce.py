"""`streamrag produce`: what a text file becomes on docs.raw.v1, labels included."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import IngestSettings
from shared.cli import produce


def parsed(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    produce.add_parser(parser.add_subparsers())
    return parser.parse_args(["produce", *argv])


def test_a_text_file_carries_the_labels_given_and_ingest_reads_them(tmp_path: Path) -> None:
    note = tmp_path / "runbook.md"
    note.write_text("Restart the payments gateway.", "utf-8")
    [(key, value)] = list(produce.records(note, parsed([str(note), "--acl", "sre, payments"])))
    assert key == str(note).encode()
    assert json.loads(value)["acl"] == "sre, payments"
    doc = parse_raw(RawMessage(value, 1.7e9, {}), IngestSettings())
    assert doc.acl == ("payments", "sre")


def test_without_acl_the_file_names_no_labels_so_ingest_applies_its_default(
        tmp_path: Path) -> None:
    note = tmp_path / "runbook.txt"
    note.write_text("Restart the payments gateway.", "utf-8")
    [(_, value)] = list(produce.records(note, parsed([str(note)])))
    assert "acl" not in json.loads(value)
