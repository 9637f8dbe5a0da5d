"""The units a passage states its facts in: each row of a table, read with its header,
else each sentence, and a sentence's clauses (split at ';' and at ', and' / ', while' ...),
each read with the subject it shares with the sentence's first clause.

A fact looked up anywhere in a chunk let a number from one row or clause support a sentence
about another ("Gold gives a 10% credit" from a table whose 10% is Silver's); the citation
check (citations.py) looks a sentence's facts up in one unit instead. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PIPE_SEPARATOR = re.compile(r":?-+:?")  # a Markdown table's "|---|:--:|" cells
_BULLET = re.compile(r"\s*(?:[-*•]|\d+[.)])\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Where a sentence's clauses meet: ';', or a comma before a conjunction, or "while"/"whereas"
# (the conjunction starts the next clause and is dropped from it).
_CLAUSE = re.compile(r"\s*;\s*|,\s+(?=(?:and|but|or|while|whilst|whereas)\s)"
                     r"|\s+(?=(?:while|whilst|whereas)\s)", re.IGNORECASE)
_CONJUNCTION = re.compile(r"^(?:and|but|or|while|whilst|whereas)\s+", re.IGNORECASE)
_BARE_AND = re.compile(r"\s+(?=(?:and|but)\s)", re.IGNORECASE)
# A clause that opens with its own subject after the conjunction: "and the on-call engineer".
_OWN_SUBJECT = re.compile(r"(?:and|but)\s+(?:the|a|an|its|their|our|his|her)\s+\w",
                          re.IGNORECASE)
_CAPITALISED = re.compile(r"(?<![\w'’-])[A-Z][\w'’-]*")
PRONOUNS = frozenset(("it", "its", "they", "their", "them", "this", "these", "he", "she",
                      "his", "her"))
MAX_CELL_CHARS = 40  # longer comma-separated pieces are prose, not a CSV row's cells


@dataclass(frozen=True)
class Unit:
    text: str  # the row, sentence or clause itself
    context: str = ""  # what it is read with: its table's header, or its clause's subject

    @property
    def full(self) -> str:
        return f"{self.context} {self.text}".strip()


def passage_units(passage: str) -> list[Unit]:
    """The units of `passage`, in order: table rows (Markdown pipe tables, or CSV-like
    lines of as many short cells), list items and lines, and the clauses of its prose."""
    lines = [line for line in passage.splitlines() if line.strip()]
    out: list[Unit] = []
    i = 0
    while i < len(lines):
        end = _table_end(lines, i)
        if end > i:
            out += _table(lines[i:end])
            i = end
            continue
        paragraph = lines[i]
        i += 1
        while i < len(lines) and _continues(paragraph, lines[i]) and _table_end(lines, i) == i:
            paragraph += " " + lines[i]
            i += 1
        out += _sentences(_SENTENCE_END.split(" ".join(paragraph.split())))
    return out


def _sentences(sentences: list[str]) -> list[Unit]:
    """The clauses of a paragraph's sentences; one that opens with a pronoun ("It keeps
    pages for 35 days") read with the names of the sentence before it, whom it is about."""
    out: list[Unit] = []
    names = ""
    for sentence in sentences:
        units = clauses(sentence)
        if names and sentence.split(maxsplit=1)[0].lower() in PRONOUNS:
            units = [Unit(u.text, f"{names} {u.context}".strip()) for u in units]
        else:
            names = " ".join(w for w in _CAPITALISED.findall(sentence)
                             if w.lower() not in PRONOUNS) or names
        out += units
    return out


def clauses(sentence: str) -> list[Unit]:
    """A sentence's clauses; the second and later ones read with the first one's subject:
    its names (the words it writes with a capital) and the words before those a later
    clause parallels, as many as the first clause has more ("Grebe keeps audit logs for 400
    days, and access logs for 90 days" reads "access logs for 90 days" with "Grebe keeps"),
    cut before its first number, so no number of the first clause is lent. A clause that
    writes a name of its own has its own subject and is read alone."""
    parts = [c for p in _CLAUSE.split(sentence.strip()) if p and p.strip()
             for c in _numbered(p.strip())]
    if len(parts) < 2:
        return [Unit(sentence.strip())] if sentence.strip() else []
    first = parts[0].split()
    names = _CAPITALISED.findall(parts[0])
    out = [Unit(parts[0])]
    for part in parts[1:]:
        text = _CONJUNCTION.sub("", part, count=1)
        if _CAPITALISED.search(text):  # a subject of its own: "..., and Silver gives 10%"
            out.append(Unit(text))
            continue
        lead = first[:max(len(first) - len(text.split()), 0)]
        lead = lead[:next((k for k, w in enumerate(lead) if _has_digit(w)), len(lead))]
        subject = [*names, *(w for w in lead if w not in names)]
        out.append(Unit(text, " ".join(subject)))
    return out


def _numbered(part: str) -> list[str]:
    """`part` split at a bare "and"/"but" where both sides state a number ("audit logs
    for 400 days and access logs for 90 days"), or where a clause of three words or more
    is followed by one with a subject of its own ("... cancelled at 13:49 and the on-call
    engineer paged the team": two facts of two passage sentences, each true where it
    stands); not in "Gold and Silver give 5%" nor "Gold and the Silver tier give 5%"."""
    out: list[str] = []
    for piece in _BARE_AND.split(part):
        if out and ((_has_digit(out[-1]) and _has_digit(piece))
                    or (_OWN_SUBJECT.match(piece) and len(out[-1].split()) >= 3)):
            out.append(piece)
        elif out:
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _continues(paragraph: str, line: str) -> bool:
    """A line that goes on the paragraph's last sentence (wrapped text): it starts lower
    case, is no list item, and the line before it did not end its sentence."""
    return (line.lstrip()[:1].islower() and not _BULLET.match(line)
            and not paragraph.rstrip().endswith((".", "!", "?", ":", ";")))


def _cells(line: str) -> list[str] | None:
    """The cells of a Markdown table row, or None."""
    if line.count("|") < 2:
        return None
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _csv_cells(line: str) -> list[str] | None:
    """The cells of a CSV-like line (comma- or tab-separated, each cell short), or None."""
    sep = "\t" if "\t" in line else ","
    cells = [c.strip() for c in line.split(sep)]
    if len(cells) < 2 or any(len(c) > MAX_CELL_CHARS for c in cells):
        return None
    return cells


def _table_end(lines: list[str], start: int) -> int:
    """Where the table starting at lines[start] ends (== start: none starts there)."""
    end = start
    if _cells(lines[start]) is not None:
        while end < len(lines) and _cells(lines[end]) is not None:
            end += 1
        return end if end - start >= 2 else start
    first = _csv_cells(lines[start])
    if first is None:
        return start
    while end < len(lines) and len(_csv_cells(lines[end]) or ()) == len(first):
        end += 1
    return end if end - start >= 2 else start


def _table(lines: list[str]) -> list[Unit]:
    """A table's rows, each read with the header (its column names) when it has one: the
    first row of a pipe table above a "|---|" row, or a CSV-like table's first row when it
    holds no digit."""
    piped = _cells(lines[0]) is not None
    # A CSV-like row is written with pipes, so "Gold,25,30" is read as 25 and 30, not 25,30.
    rows = [line.strip() if piped else " | ".join(_csv_cells(line) or ()) for line in lines
            if not all(_PIPE_SEPARATOR.fullmatch(c) for c in (_cells(line) or ["x"]) if c)]
    headed = (piped and len(rows) < len(lines) and rows[0] == lines[0].strip()) or (
        not piped and not any(c.isdigit() for c in lines[0]))
    if not headed:
        return [Unit(row) for row in rows]
    return [Unit(rows[0])] + [Unit(row, rows[0]) for row in rows[1:]]
