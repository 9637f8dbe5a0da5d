"""The README stays a user's page: its first commands are exactly `scripts/up` and
`scripts/test`, it stays short (figures and design notes live in docs/), and every file it
links to exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
MAX_LINES = 350


def test_the_first_commands_are_up_and_test() -> None:
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["scripts/up", "scripts/test"]


def test_it_stays_short() -> None:
    assert len(README.splitlines()) <= MAX_LINES


def test_every_linked_file_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links to its docs"
    assert [link for link in local if not (ROOT / link).exists()] == []
