"""One redactor behind a pipe, for `scripts/bench_redaction --forms`: run from a source tree
(this checkout, or an older commit unpacked beside it) as `python -m
scripts.benchlib.pii_worker`, it loads that tree's services.redaction Redactor with its
default settings, then answers one JSON line per request line.

Request: {"texts": [...]}. Answer: {"texts": [...redacted], "findings": [[[start, end,
entity], ...] per text] or null, "wall_s": ..., "cpu_s": ...}; the first line it writes is
{"ready": true, "load_s": ...}. Only the time of Redactor.redact_texts is counted; the
findings are what its analyze step returned in that call (null if it made no such call).
Imports nothing but the standard library and the tree's own services/, so the same file
works in every tree it is copied into.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def main() -> int:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever the libraries print goes to stderr, never into the answers
    started = time.perf_counter()
    from services.redaction.redactor import Redactor
    from services.redaction.settings import RedactionSettings

    redactor = Redactor(RedactionSettings())
    redactor.redact_texts(["warm up Robert Miller +1 415-555-0199"])
    analyze = redactor.analyze
    calls: list[tuple[list[str], Any]] = []

    def spy(texts: list[str]) -> Any:
        found = analyze(texts)
        calls.append((list(texts), found))
        return found

    redactor.analyze = spy  # type: ignore[method-assign]
    print(json.dumps({"ready": True, "load_s": time.perf_counter() - started}), file=replies,
          flush=True)
    for line in sys.stdin:
        texts = json.loads(line)["texts"]
        calls.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        done = redactor.redact_texts(texts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        findings = next(([[[r.start, r.end, r.entity_type] for r in rs] for rs in found]
                         for seen, found in calls if seen == texts), None)
        print(json.dumps({"texts": [d.text for d in done], "findings": findings,
                          "wall_s": wall, "cpu_s": cpu}), file=replies, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
