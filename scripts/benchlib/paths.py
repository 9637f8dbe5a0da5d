"""Where the benchmarks find the repository, BEIR collections and anvil, and write results."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# BEIR collections live outside the repository: $BEIR names their folder (default ./beir).
BEIR = Path(os.environ.get("BEIR", "beir"))
ANVIL = ROOT / ".tools/node_modules/.bin/anvil"
RESULTS = ROOT / "bench-results"
