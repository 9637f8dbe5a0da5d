"""What counts as a leak and as a false positive in `scripts/bench_redaction --forms`.

Which characters of a document the redactor replaced is read from its findings (the spans
its analyze step returned) when replacing them by their placeholders gives exactly the
redacted text it returned; otherwise from an alignment of the two texts (difflib: what is
left of the original is what the longest common runs hold).

- A planted value is LEAKED when any of its identifying units (scripts/benchlib/
  pii_render.py: each digit, letter or escape that carries an identifying character, or the
  whole base64 token) keeps a character that was not replaced, in any occurrence of the
  value. Caught = nothing identifying survives. "Untouched" = not one identifying character
  was replaced. So a phone whose country code survives is caught, one whose last digit
  survives is leaked; an e-mail whose ".com" survives is caught, one whose domain survives
  is leaked.
- An ordinary token (scripts/benchlib/pii_business.py) is a FALSE POSITIVE when any of its
  characters was replaced; a word of an abstract likewise.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scripts.benchlib.pii_business import BusinessDoc
from scripts.benchlib.pii_planted import Planted, PlantedDoc

Finding = tuple[int, int, str]  # start, end, entity


def replaced(text: str, redacted: str, findings: list[Finding] | None) -> tuple[list[bool], bool]:
    """Per character of `text`: was it replaced? And whether the findings explained it."""
    if findings is not None:
        out, at, mask = [], 0, [False] * len(text)
        for a, b, entity in _joined(text, sorted(findings)):
            if a < at:
                break
            out += [text[at:a], f"<{entity}>"]
            mask[a:b] = [True] * (b - a)
            at = b
        else:
            if "".join(out) + text[at:] == redacted:
                return mask, True
    mask = [True] * len(text)
    matcher = difflib.SequenceMatcher(None, text, redacted, autojunk=False)
    for block in matcher.get_matching_blocks():
        mask[block.a:block.a + block.size] = [False] * block.size
    return mask, False


def _joined(text: str, findings: list[Finding]) -> list[Finding]:
    """Findings of one type with only spaces (one or more) between them as one, as
    Presidio's anonymizer replaces them."""
    out: list[Finding] = []
    for a, b, entity in findings:
        gap = text[out[-1][1]:a] if out else ""
        if out and out[-1][2] == entity and gap and gap == " " * len(gap):
            out[-1] = (out[-1][0], b, entity)
        else:
            out.append((a, b, entity))
    return out


@dataclass(frozen=True)
class Outcome:
    planted: Planted
    caught: bool
    untouched: bool


def outcomes(doc: PlantedDoc, mask: list[bool]) -> list[Outcome]:
    out = []
    for p in doc.planted:
        units = [mask[a:b] for a, b in p.units]
        out.append(Outcome(p, all(all(u) for u in units), not any(any(u) for u in units)))
    return out


def changed_tokens(doc: BusinessDoc, mask: list[bool]) -> list[tuple[str, bool]]:
    return [(t.kind, any(mask[t.span[0]:t.span[1]])) for t in doc.tokens]


def changed_words(text: str, mask: list[bool]) -> tuple[int, int]:
    words = [m.span() for m in re.finditer(r"\S+", text)]
    return len(words), sum(any(mask[a:b]) for a, b in words)


@dataclass
class Tally:
    n: int = 0
    caught: int = 0
    untouched: int = 0

    def add(self, o: Outcome) -> None:
        self.n += 1
        self.caught += o.caught
        self.untouched += o.untouched

    @property
    def recall(self) -> float:
        return self.caught / self.n if self.n else float("nan")

    def as_dict(self) -> dict[str, float]:
        return {"n": self.n, "caught": self.caught, "untouched": self.untouched,
                "recall": self.recall}


def tally(found: Iterable[Outcome], key: Callable[[Outcome], tuple[str, ...]],
          ) -> dict[tuple[str, ...], Tally]:
    out: dict[tuple[str, ...], Tally] = {}
    for o in found:
        out.setdefault(key(o), Tally()).add(o)
    return out


def fp_tally(found: Iterable[tuple[str, bool]]) -> dict[str, tuple[int, int]]:
    n: Counter[str] = Counter()
    hit: Counter[str] = Counter()
    for kind, changed in found:
        n[kind] += 1
        hit[kind] += changed
    return {k: (n[k], hit[k]) for k in n}
