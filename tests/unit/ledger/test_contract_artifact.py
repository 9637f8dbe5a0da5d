"""The committed ABI and bytecode are exactly what the committed Vyper source compiles to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import vyper

from services.ledger.deployment import ARTIFACT, artifact

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ARTIFACT.with_suffix(".vy")


def test_committed_bytecode_matches_a_fresh_compile() -> None:
    fresh = vyper.compile_code(SOURCE.read_text(), output_formats=["abi", "bytecode"])
    committed = json.loads(ARTIFACT.read_text())
    assert committed["bytecode"] == fresh["bytecode"]
    assert committed["abi"] == fresh["abi"]
    assert committed["compiler"] == f"vyper {vyper.__version__}"


def test_compile_script_check_mode_agrees() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_contract"), "--check"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "is current" in run.stdout


def test_abi_has_the_interface_the_client_uses() -> None:
    names = {entry.get("name") for entry in artifact()["abi"]}
    assert {"anchor", "anchors", "OWNER", "Anchored", "batch_of_root"} <= names
