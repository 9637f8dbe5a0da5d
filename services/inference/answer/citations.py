"""Which retrieved chunks an answer cites, and whether its sentences are grounded in them.

Both answer paths end here. An extractive answer quotes sentences and marks each "[n]", so
its markers are its citations. A generative answer's markers are the model's own claim:
a marker naming a passage the model was never shown is flagged (`unknown_markers`), and an
answer that names none although passages were given is flagged `uncited`. Small instruct
models rarely write markers at all (SmolLM2-135M wrote one correct "[n]" in 25 tries), so
an uncited answer's citations are attributed instead: each sentence to the passage that
holds the largest share of its words, if that share reaches SUPPORT (`cited_by` says
which way the citations were found).

`supported_share` is the faithfulness signal on every answer: the share of the answer's
sentences grounded in one cited chunk. A sentence is grounded in a passage when the
passage holds at least SUPPORT of its content words *and every fact it states*: each number
(`35`, `2.5`, `1,200`, `20%`, a date's parts and month names), each name or term written
with a capital (the first word too, "Dingo follows ...", unless it is a stop word or an
opener), and each quoted term (`facts`). A generated sentence's facts must stand together in
one unit of the passage (units.py: a table row read with its header, a sentence, a clause
read with its subject), clause by clause of the sentence, and that unit must be one the
sentence is about: no unit has a larger share of its label (its words no other unit holds:
"Gold", "console", "audit") said by the sentence, and it holds one of the sentence's words
in its own text, not only in its header (`_in_one_unit`). So a number from the Silver row
does not support a sentence about Gold, nor access logs' 90 days one about audit logs.
A quoted answer's facts need only stand in its chunk: it is a passage's sentence, verbatim.
Word overlap alone credited "retention is 30 days" against a passage saying 35 days, and an
answer that took a service's name from one passage and its number from another; facts
anywhere in the chunk credited another row's number. Overlap and facts rather than an
entailment model because no NLI model is installable here; it credits a sentence copied or
closely paraphrased from a passage and fails one that adds, changes or moves facts, which
is the failure that matters in a small model.

Pure: no model, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from services.inference.answer.units import Unit, clauses, passage_units

MARKER = re.compile(r"\[(\d{1,3})\]")
_WORD = re.compile(r"[^\W_]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
SUPPORT = 0.5  # share of a sentence's content words found in one passage
_STOPS = ("a an and are as at be been but by can could did do does for from had has have how "
          "i if in into is it its of on or so such than that the their them then there these "
          "they this those to was were what when where which while who why will with would you "
          "your not no yes also only about after before over under more most some any each "
          "other")
STOP_WORDS = frozenset(_STOPS.split())


@dataclass(frozen=True)
class CitationCheck:
    cited_ids: tuple[str, ...]  # first mention first
    cited_by: str  # "quoted" (extractive), "model" (its markers), "overlap" or "none"
    uncited: bool  # passages were given and the model's text names none of them
    unknown_markers: tuple[int, ...]  # "[n]" naming no passage the model was shown
    supported_share: float  # answer sentences grounded in a cited chunk (1.0: no sentence)


# A number as written (thousands separators and decimals), read as its digits.
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»\n]{2,80})[\"“”«»]")
_CAPITALISED = re.compile(r"(?<![\w'’-])[A-Z][\w'’-]*")


# Words that start a sentence of an answer without stating anything themselves.
OPENERS = frozenset(str.split(
    "according based here however therefore thus sure yes okay ok overall in on at per "
    "both all none one another usually typically generally currently today answer"))
MONTHS = {name: n for n, names in enumerate((
    "january jan", "february feb", "march mar", "april apr", "may", "june jun", "july jul",
    "august aug", "september sep sept", "october oct", "november nov", "december dec"), 1)
    for name in names.split()}


def _number(written: str) -> str:
    """`1,200` and `1200` alike; `2.50` as `2.5`; a trailing separator dropped."""
    digits = written.rstrip(".,")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", digits):
        digits = digits.replace(",", "")
    if "." in digits and re.fullmatch(r"\d+\.\d+", digits):
        digits = digits.rstrip("0").rstrip(".")
    return str(int(digits)) if digits.isdigit() else digits


_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
# A date written whole, read as "#2026-3-5" whatever its form: year-month-day, day.month.year,
# "5 March 2026", "March 5, 2026". Its parts alone would let 2025-04-03 stand in a passage
# saying 2025-03-04.
_DATES = (
    (re.compile(r"(?<![\d.-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\d-])"), (1, 2, 3)),
    (re.compile(r"(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})(?![\d.]\d)"), (3, 2, 1)),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH})\.?,?\s+(\d{{4}})\b", re.I),
     (3, 2, 1)),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I),
     (3, 1, 2)),
)


def dates(text: str) -> set[str]:
    """The whole dates `text` writes, as "#year-month-day"."""
    out = set()
    for pattern, (y, m, d) in _DATES:
        for found in pattern.finditer(text):
            month = found.group(m)
            month_n = int(month) if month.isdigit() else MONTHS[month.lower()]
            if 1 <= month_n <= 12 and 1 <= int(found.group(d)) <= 31:
                out.add(f"#{int(found.group(y))}-{month_n}-{int(found.group(d))}")
    return out


def facts(sentence: str) -> set[str]:
    """What a sentence states that a passage must hold for it to be grounded: its numbers
    ("#35"; a whole date as one too, "#2026-3-5", besides its parts), the words it writes
    with a capital ("name:tamarin"; its first word too unless a stop word or an opener such
    as "According"), and its quoted terms ("term:lazy eviction")."""
    sentence = MARKER.sub("", sentence)
    out = {f"#{_number(m.group())}" for m in _NUMBER.finditer(sentence)} | dates(sentence)
    first = _WORD.search(sentence)
    for m in _CAPITALISED.finditer(sentence):
        word = m.group().lower()
        if first is not None and m.start() == first.start() and (
                word in STOP_WORDS or word in OPENERS):
            continue  # "The", "According": capitalised only because they start it
        # A sentence's first word is often its subject ("Dingo follows ..."): a fact.
        if word in MONTHS:  # "5 March 2026" is the date 2026-03-05 of a passage too
            out.add(f"#{MONTHS[word]}")
        elif word not in STOP_WORDS:
            out.add(f"name:{word}")
    out.update(f"term:{' '.join(m.group(1).lower().split())}"
               for m in _QUOTED.finditer(sentence))
    return out


Held = tuple[set[str], set[str], str]  # a passage's numbers, words and lowered text


def passage_facts(passage: str) -> Held:
    """(numbers, words, lowered text) of a passage, to look a sentence's facts up in."""
    numbers = {f"#{_number(m.group())}" for m in _NUMBER.finditer(passage)}
    # A dotted date's parts too ("05.03.2026" holds 5, 3 and 2026); not a decimal's or a
    # thousands group's ("2.5" does not say 5, "25,000" does not say 0).
    numbers |= {f"#{int(part)}" for m in _NUMBER.finditer(passage)
                if len(re.findall(r"[.,]", m.group().rstrip(".,"))) >= 2
                and not re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", m.group().rstrip(".,"))
                for part in re.split(r"[.,]", m.group()) if part.isdigit()}
    lowered = passage.lower()
    words = {m.group() for m in _WORD.finditer(lowered)}
    numbers |= {f"#{MONTHS[w]}" for w in words if w in MONTHS}  # "March 5": month 3 too
    numbers |= dates(passage)
    return numbers, words, " ".join(lowered.split())


def unsupported_facts(sentence: str, passage: str) -> set[str]:
    """The facts of `sentence` that `passage` does not hold."""
    return _missing(facts(sentence), passage_facts(passage))


def _missing(stated: set[str], held: Held) -> set[str]:
    numbers, words, text = held
    out = set()
    for fact in stated:
        kind, _, value = fact.partition(":")
        if fact.startswith("#"):
            if fact not in numbers:
                out.add(fact)
        elif kind == "name":
            if value not in words and not all(w in words for w in _WORD.findall(value)):
                out.add(fact)
        elif value not in text:
            out.add(fact)
    return out


def content_words(text: str) -> set[str]:
    """Its words but stop words, lower case; its numbers as read ("1,200" as "1200", "03"
    as "3"), so a number counts as written either way."""
    numbers = {_number(m.group()) for m in _NUMBER.finditer(text)}
    rest = _NUMBER.sub(" ", text)
    return numbers | {w for w in (m.group().lower() for m in _WORD.finditer(rest))
                      if w not in STOP_WORDS}


def sentences(answer: str) -> list[str]:
    """The answer's sentences without their markers, those with no content word left out."""
    parts = (MARKER.sub("", p).strip() for p in _SENTENCE.split(answer))
    return [p for p in parts if content_words(p)]


def coverage(sentence: str, passage: str) -> float:
    """The share of `sentence`'s content words that `passage` holds."""
    return _covered(content_words(sentence), content_words(passage))


def _covered(words: set[str], passage: set[str]) -> float:
    return len(words & passage) / len(words) if words else 0.0


def marked(answer: str, chunk_ids: Sequence[str], shown: Sequence[int] | None = None,
           ) -> tuple[list[str], list[int]]:
    """The chunk ids the "[n]" markers name (first mention first) and the unknown n.

    `shown` are the 1-based numbers of the passages the model saw (all when None)."""
    allowed = set(shown) if shown is not None else set(range(1, len(chunk_ids) + 1))
    ids: list[str] = []
    unknown: list[int] = []
    for match in MARKER.finditer(answer):
        n = int(match.group(1))
        if n in allowed and 1 <= n <= len(chunk_ids):
            if chunk_ids[n - 1] not in ids:
                ids.append(chunk_ids[n - 1])
        elif n not in unknown:
            unknown.append(n)
    return ids, unknown


def check_quoted(answer: str, chunk_ids: Sequence[str], texts: Sequence[str],
                 ) -> CitationCheck:
    """An extractive answer: its markers are its citations."""
    ids, unknown = marked(answer, chunk_ids)
    return CitationCheck(tuple(ids), "quoted", bool(chunk_ids) and not ids, tuple(unknown),
                         supported(answer, ids, chunk_ids, texts, by_unit=False))


def check_generated(answer: str, chunk_ids: Sequence[str], texts: Sequence[str],
                    shown: Sequence[int]) -> CitationCheck:
    """A generative answer over the passages numbered `shown` (1-based into chunk_ids)."""
    ids, unknown = marked(answer, chunk_ids, shown)
    uncited = bool(shown) and not ids
    cited_by = "model"
    if not ids:
        ids = attribute(answer, chunk_ids, texts, shown)
        cited_by = "overlap" if ids else "none"
    return CitationCheck(tuple(ids), cited_by, uncited, tuple(unknown),
                         supported(answer, ids, chunk_ids, texts))


def attribute(answer: str, chunk_ids: Sequence[str], texts: Sequence[str],
              shown: Sequence[int]) -> list[str]:
    """Each sentence's best-covering shown passage, when it covers at least SUPPORT."""
    passages = {n: content_words(texts[n - 1]) for n in shown}  # each passage read once
    ids: list[str] = []
    for sentence in sentences(answer):
        words = content_words(sentence)
        best = max(shown, key=lambda n: _covered(words, passages[n]), default=None)
        if (best is not None and _covered(words, passages[best]) >= SUPPORT
                and chunk_ids[best - 1] not in ids):
            ids.append(chunk_ids[best - 1])
    return ids


def supported(answer: str, cited: Sequence[str], chunk_ids: Sequence[str],
              texts: Sequence[str], by_unit: bool = True) -> float:
    """The share of the answer's sentences grounded in one cited chunk: at least SUPPORT
    of its content words and every fact it states (module docstring) in that chunk, in
    one unit of it (`by_unit`; else anywhere in it, as a quote's)."""
    said = sentences(answer)
    if not said:
        return 1.0
    by_id = dict(zip(chunk_ids, texts, strict=True))
    passages = [_Passage.read(by_id[c]) for c in cited if c in by_id]
    grounded = sum(1 for s in said if _grounded(s, passages, by_unit))
    return grounded / len(said)


@dataclass(frozen=True)
class _Read:
    """A unit as a sentence's facts are looked up in it."""
    words: frozenset[str]  # its content words and its context's, numbers aside
    own: frozenset[str]  # those of its own text (a row's cells, not its header)
    label: frozenset[str]  # its words no other unit of the passage holds ("Gold")
    held: Held


@dataclass(frozen=True)
class _Passage:
    words: set[str]  # content words, for the SUPPORT share
    held: Held  # the whole chunk's facts
    units: tuple[_Read, ...]

    @classmethod
    def read(cls, text: str) -> _Passage:
        units = passage_units(text)
        # Its words as written and as its units read them ("Gold,25,30": 25 and 30).
        words = content_words(text).union(*(content_words(u.text) for u in units))
        plain = [_plain(u.full) for u in units]
        seen = Counter(w for p in plain for w in p)
        return cls(words, passage_facts(text), tuple(
            _Read(p, _plain(u.text), frozenset(w for w in p if seen[w] == 1),
                  passage_facts(u.full)) for u, p in zip(units, plain, strict=True)))


def _plain(text: str) -> frozenset[str]:
    return frozenset(w for w in content_words(text) if not w[0].isdigit())  # numbers aside


def _grounded(sentence: str, passages: Sequence[_Passage], by_unit: bool) -> bool:
    words, stated = content_words(sentence), facts(sentence)
    for p in passages:
        if _covered(words, p.words) < SUPPORT:
            continue
        if not stated:
            return True
        if by_unit:
            if all(_in_one_unit(c, p.units) for c in clauses(MARKER.sub("", sentence))):
                return True
        elif not _missing(stated, p.held):
            return True
    return False


def _in_one_unit(clause: Unit, units: Sequence[_Read]) -> bool:
    """Whether the facts `clause` states stand together in one unit it is about: one whose
    label (the words no other unit holds) it says as large a share of as of any unit's,
    holding one of its words in its own text (not only in a header) besides. The share, not
    the count: a label may be one word ("access") or more ("audit trail"). And no unit with
    numbers of its own whose whole label it says may lack its facts: "audit and access logs
    are kept 90 days" says audit's label with access's number."""
    stated = facts(clause.full)
    if not stated:
        return True
    words, own = _plain(clause.full), _plain(clause.text)
    fits = [not _missing(stated, u.held) for u in units]
    if any(u.label and u.label <= words and u.held[0] and not fit
           for u, fit in zip(units, fits, strict=True)):
        return False
    said = [len(words & u.label) / len(u.label) if u.label else 0.0 for u in units]
    best = max(said, default=0.0)
    return any(share == best and own & u.own and fit
               for share, u, fit in zip(said, units, fits, strict=True))
