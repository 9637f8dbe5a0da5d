"""The tables `scripts/bench_redaction --forms` prints, and the figures it writes as JSON,
from what each redactor did (`Side`, filled by scripts/benchlib/pii_bench.py).

Recall per form, type and locale counts the planted matrix only (every (form, type, locale)
the same number of times); the values added so that each variant of a form is seen often
enough (`Planted.sweep`) count in the per-variant table only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scripts.benchlib import pii_planted as pp
from scripts.benchlib import pii_scoring as sc
from scripts.benchlib.pii_business import KINDS
from scripts.benchlib.pii_render import variants
from scripts.benchlib.pii_values import LOCALES, SECRET_KINDS


@dataclass
class Side:
    """What one redactor did: outcomes of planted values, changed tokens, time per set."""

    name: str
    outcomes: list[sc.Outcome] = field(default_factory=list)
    tokens: list[tuple[str, bool]] = field(default_factory=list)  # (kind, changed)
    containers: list[tuple[str, bool]] = field(default_factory=list)  # business docs
    # abstracts: words, words changed, documents, documents changed
    words: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    time: dict[str, list[float]] = field(default_factory=dict)  # set -> [docs, chars, wall, cpu]
    explained: list[int] = field(default_factory=lambda: [0, 0])  # by findings, of all docs
    redacted: dict[int, str] = field(default_factory=dict)  # planted document -> redacted

    @property
    def matrix(self) -> list[sc.Outcome]:
        return [o for o in self.outcomes if not o.planted.sweep]

    def rate(self, col: int, only: str | None = None) -> float:
        """Documents per second of wall (col 2) or CPU (col 3) time, of one set or all."""
        rows = [t for s, t in self.time.items() if only in (None, s)]
        spent = sum(t[col] for t in rows)
        return sum(t[0] for t in rows) / spent if spent else float("nan")


def aligned(rows: list[list[str]], labels: int = 1) -> str:
    """Columns padded to their widest cell: the first `labels` to the left, numbers right."""
    widths = [max(len(r[c]) for r in rows if c < len(r)) for c in range(max(map(len, rows)))]
    return "\n".join("  ".join(cell.ljust(widths[c]) if c < labels else cell.rjust(widths[c])
                               for c, cell in enumerate(r)).rstrip() for r in rows)


def pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}"


KeyOf = Callable[[sc.Outcome], tuple[str, ...]]


def _rank(part: str, order: list[list[str]]) -> tuple[int, str]:
    return next(((r.index(part), part) for r in order if part in r), (999, part))


def recall_table(sides: dict[str, Side], title: str, key: KeyOf, head: list[str],
                 label: Callable[[tuple[str, ...]], list[str]] = list,
                 order: list[list[str]] | None = None, matrix: bool = True) -> str:
    """Per key: n, recall of each side, and how many the last side left untouched."""
    pick = {n: (s.matrix if matrix else s.outcomes) for n, s in sides.items()}
    tallies = {n: sc.tally(found, key) for n, found in pick.items()}
    last = list(sides)[-1]
    ranks = order or [list(pp.FORMS), list(pp.TYPES), list(LOCALES)]
    rows = [[*head, "n", *(f"{n} %" for n in sides), f"untouched ({last}) %"]]
    for k in sorted(tallies[last], key=lambda k: [_rank(p, ranks) for p in k]):
        t = tallies[last][k]
        rows.append([*label(k), str(t.n), *(pct(tallies[n][k].recall) for n in sides),
                     pct(t.untouched / t.n)])
    if matrix:
        inscope = {n: sc.tally([o for o in found if o.planted.form not in pp.OUT_OF_SCOPE],
                               lambda o: ("all",)).get(("all",), sc.Tally())
                   for n, found in pick.items()}
        pad = [""] * (len(head) - 1)
        rows.append(["all in scope", *pad, str(inscope[last].n),
                     *(pct(inscope[n].recall) for n in sides),
                     pct(inscope[last].untouched / max(inscope[last].n, 1))])
        if head == ["form"]:
            means = {n: _mean([t.recall for k, t in tallies[n].items()
                               if k[0] not in pp.OUT_OF_SCOPE]) for n in sides}
            rows.append(["mean over forms", *pad, "", *(pct(means[n]) for n in sides), ""])
    return f"\n{title}\n{aligned(rows, len(head))}"


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def cell_table(side: Side) -> str:
    cells = sc.tally(side.matrix, lambda o: (o.planted.form, o.planted.type, o.planted.locale))
    rows = [["form", "type", *LOCALES, "all %"]]
    for form in pp.FORMS:
        for type_ in pp.TYPES:
            got = {loc: cells.get((form, type_, loc)) for loc in LOCALES}
            if not any(got.values()):
                continue
            n = sum(t.n for t in got.values() if t)
            caught = sum(t.caught for t in got.values() if t)
            rows.append([pp.FORMS[form], pp.TYPES[type_],
                         *(f"{t.caught}/{t.n}" if t else "" for t in got.values()),
                         pct(caught / n)])
    return (f"\nvalues caught / planted per form x type x locale ({side.name})\n"
            + aligned(rows, 2))


def variant_table(sides: dict[str, Side]) -> str:
    chosen = {n: Side(n, [o for o in s.outcomes if o.planted.variant])
              for n, s in sides.items()}
    names = sorted({v for loc in LOCALES for f in pp.FORMS for v in variants(f, loc)})
    return recall_table(chosen, "recall per variant of a form (all values, the variant sweep "
                        "included)", lambda o: (o.planted.form, o.planted.variant),
                        ["form", "variant"], lambda k: [pp.FORMS[k[0]], k[1]],
                        [list(pp.FORMS), _variant_order(names)], matrix=False)


KIND_OF = {"phone": "region", "card": "brand", "iban": "country", "secret": "kind"}


def kind_table(sides: dict[str, Side]) -> str:
    chosen = {n: Side(n, [o for o in s.matrix if o.planted.type in KIND_OF
                          and o.planted.form not in pp.OUT_OF_SCOPE]) for n, s in sides.items()}
    kinds = sorted({o.planted.kind for s in chosen.values() for o in s.outcomes})
    return recall_table(chosen, "recall per phone region, card brand, IBAN country and kind "
                        "of secret (in-scope forms)", lambda o: (o.planted.type, o.planted.kind),
                        ["type", "of"], lambda k: [pp.TYPES[k[0]], f"{KIND_OF[k[0]]} {k[1]}"],
                        [list(pp.TYPES), [*SECRET_KINDS, *kinds]], matrix=False)


def _variant_order(names: list[str]) -> list[str]:
    first = [v for f in pp.FORMS if f != "digits" for v in variants(f, "de")]
    return [*dict.fromkeys(first + ["devanagari", "arabic-indic", "fullwidth"] + names)]


def _share(nk: tuple[int, int]) -> str:
    n, k = nk
    return f"{k} ({100 * k / n:.1f}%)" if n else "-"


def fp_table(sides: dict[str, Side]) -> str:
    last = list(sides)[-1]
    kinds = {n: sc.fp_tally(s.tokens) for n, s in sides.items()}
    rows = [["ordinary token", "n", *(f"{n} changed" for n in sides)]]
    for kind, (label, _) in KINDS.items():
        if kind in kinds[last]:
            rows.append([label, str(kinds[last][kind][0]),
                         *(_share(kinds[s].get(kind, (0, 0))) for s in sides)])
    docs = {n: sc.fp_tally(s.containers) for n, s in sides.items()}
    for container, (n, _) in docs[last].items():
        rows.append([f"{container} document changed at all", str(n),
                     *(_share(docs[s][container]) for s in sides)])
    words = {n: s.words for n, s in sides.items()}
    if words[last][2]:
        rows.append(["abstract word (held-out BEIR)", str(words[last][0]),
                     *(_share((w[0], w[1])) for w in words.values())])
        rows.append(["abstract changed at all", str(words[last][2]),
                     *(_share((w[2], w[3])) for w in words.values())])
    return ("\nfalse positives: ordinary tokens changed at all by redaction (IP addresses are "
            "personal data here: not among them)\n" + aligned(rows))


def speed_table(sides: dict[str, Side]) -> str:
    names = list(sides)
    first = sides[names[0]]
    rows = [["documents", "n", "KB", *(f"{n} docs/s" for n in names),
             *(f"{n} per CPU-s" for n in names)]]
    if len(names) == 2:
        rows[0] += ["ratio wall", "ratio CPU"]
    for only in (*first.time, None):
        docs, chars = (sum(v[c] for s, v in first.time.items() if only in (None, s))
                       for c in (0, 1))
        wall = [sides[n].rate(2, only) for n in names]
        cpu = [sides[n].rate(3, only) for n in names]
        row = [only or "all", f"{docs:.0f}", f"{chars / 1000:.0f}", *(f"{x:.2f}" for x in wall),
               *(f"{x:.2f}" for x in cpu)]
        if len(names) == 2:
            row += [f"{wall[1] / wall[0]:.2f}x", f"{cpu[1] / cpu[0]:.2f}x"]
        rows.append(row)
    return ("\nspeed of redact_texts, the same batches alternating between the redactors"
            + (f" (ratio = {names[1]} / {names[0]})" if len(names) == 2 else "")
            + "\n" + aligned(rows))


def report(sides: dict[str, Side], cells: str) -> str:
    def one(part: str) -> KeyOf:
        return lambda o: (getattr(o.planted, part),)
    inscope = {n: Side(n, [o for o in s.outcomes if o.planted.form not in pp.OUT_OF_SCOPE])
               for n, s in sides.items()}
    parts = [
        recall_table(sides, "recall per form (caught: nothing identifying left in the "
                     "redacted text; the (extra) and (out of scope) rows are not in the "
                     "totals)", one("form"), ["form"], lambda k: [pp.FORMS[k[0]]]),
        recall_table(inscope, "recall per type (in-scope forms)", one("type"), ["type"],
                     lambda k: [pp.TYPES[k[0]]]),
        recall_table(inscope, "recall per locale (in-scope forms)", one("locale"),
                     ["locale"]),
    ]
    names = list(sides) if cells == "both" else [list(sides)[0 if cells == "baseline" else -1]]
    parts += [cell_table(sides[n]) for n in names]
    parts += [variant_table(sides), kind_table(sides), fp_table(sides), speed_table(sides)]
    return "\n".join(parts)


def summary(sides: dict[str, Side]) -> dict[str, Any]:
    """The figures of every side, as JSON: tallies, not the values themselves."""
    def flat(found: list[sc.Outcome], key: KeyOf) -> dict[str, dict[str, float]]:
        return {"/".join(k): t.as_dict() for k, t in sc.tally(found, key).items()}
    out: dict[str, Any] = {}
    for n, s in sides.items():
        out[n] = {
            "cells": flat(s.matrix, lambda o: (o.planted.form, o.planted.type,
                                               o.planted.locale)),
            "variants": flat(s.outcomes, lambda o: (o.planted.form, o.planted.variant,
                                                    o.planted.kind)),
            "false_positives": {k: {"n": v[0], "changed": v[1]}
                                for k, v in sc.fp_tally(s.tokens).items()},
            "documents_changed": {k: {"n": v[0], "changed": v[1]}
                                  for k, v in sc.fp_tally(s.containers).items()},
            "abstracts": dict(zip(["words", "words_changed", "docs", "docs_changed"], s.words,
                                  strict=True)),
            "speed": {k: dict(zip(["docs", "chars", "wall_s", "cpu_s"], v, strict=True))
                      for k, v in s.time.items()},
            "findings_explained": {"docs": s.explained[1], "by_findings": s.explained[0]},
        }
    return out
