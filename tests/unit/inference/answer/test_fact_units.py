"""A generated sentence is supported only where its facts stand together in one row, clause
or sentence of a cited passage, the one it is about: a value from another row or clause of
the same table or sentence does not support it (answer/units.py, answer/citations.py).

Tables and prose are built from a seeded random.Random: the hypothesis tests draw the seeds
(TUNED), and the held-out test walks a fixed seed range outside it that no tuning looked at.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.answer import citations
from services.inference.answer.citations import MONTHS, OPENERS, STOP_WORDS

FIXED = {"the", "and", "for", "has", "with", "listed"}
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December"]


def words(rng: random.Random, n: int) -> list[str]:
    """`n` distinct made-up words, none a stop word, opener, month or template word."""
    out: list[str] = []
    while len(out) < n:
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
        if word not in out and not ({word} & (STOP_WORDS | OPENERS | FIXED | set(MONTHS))):
            out.append(word)
    return out


@dataclass(frozen=True)
class Value:
    cell: str  # as the table writes it
    said: tuple[str, ...]  # ways a sentence may write it


def values(rng: random.Random, n: int) -> list[Value]:
    """`n` values of one kind, distinct as read (and no two numbers of a table alike)."""
    kind = rng.choice(["int", "thousands", "percent", "decimal", "date"])
    if kind == "date":
        days = rng.sample(range(dt.date(1990, 1, 1).toordinal(),
                                dt.date(2060, 12, 31).toordinal()), n)
        dates = [dt.date.fromordinal(d) for d in days]
        return [Value(d.isoformat(), (d.isoformat(), f"{d.day} {MONTH_NAMES[d.month - 1]} "
                                      f"{d.year}", f"{MONTH_NAMES[d.month - 1]} {d.day}, "
                                      f"{d.year}")) for d in dates]
    numbers = rng.sample(range(1, 10**6 if kind in ("int", "thousands") else 1000), n)
    if kind == "percent":
        return [Value(f"{k}%", (f"{k}%", f"{k} percent")) for k in numbers]
    if kind == "decimal":
        return [Value(f"{k // 100}.{k % 100:02d}", (f"{k / 100:g}",)) for k in numbers]
    if kind == "thousands":
        return [Value(f"{k:,}", (f"{k:,}", str(k))) for k in numbers]
    return [Value(str(k), (str(k),)) for k in numbers]


@dataclass(frozen=True)
class Table:
    text: str
    labels: list[str]  # each row's label, as the rows write it
    column: str  # the value column's name ("" where the table has no header)
    values: list[Value]


def table(rng: random.Random) -> Table:
    """A Markdown or CSV-like table of 2-6 rows: a label, a value, maybe a number column
    more; with or without a header, maybe under a line of prose."""
    rows = rng.randint(2, 6)
    pool = words(rng, rows + 6)
    brand = pool.pop().capitalize() if rng.random() < 0.4 else ""  # "Harrier console"
    capital = rng.random() < 0.5
    labels = [" ".join(filter(None, (brand, w.capitalize() if capital else w)))
              for w in pool[:rows]]
    name, column, extra, intro = pool[rows:rows + 4]
    vals = values(rng, rows)
    used = {v.cell for v in vals}
    # A third column of counts, none equal to any value of the table (a number standing in
    # the row itself is that row's, whatever its column).
    counts = [str(k) for k in rng.sample(range(1, 10**5), rows * 3)
              if str(k) not in used and not any(str(k) in v.cell for v in vals)][:rows]
    third = rng.random() < 0.4 and len(counts) == rows
    header = [name, column] + ([extra] if third else [])
    body = [[label, v.cell] + ([c] if third else [])
            for label, v, c in zip(labels, vals, counts + [""] * rows, strict=False)]
    if rng.random() < 0.6:
        lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
        lines += [f"| {' | '.join(row)} |" for row in body]
        if rng.random() < 0.3:
            lines, column = lines[2:], ""  # no header: no column name to say
    else:
        # Unquoted commas in a cell ("1,200") make no CSV: such values go tab-separated.
        sep = "," if rng.random() < 0.7 and not any("," in v.cell for v in vals) else "\t"
        if rng.random() < 0.3:
            header, column = [], ""
        lines = [sep.join(header)] if header else []
        lines += [sep.join(row) for row in body]
    if rng.random() < 0.4:
        lines.insert(0, f"The {intro} {name} table.")
    return Table("\n".join(lines), labels, column, vals)


def about(rng: random.Random, label: str, column: str, value: Value) -> str:
    said = rng.choice(value.said)
    if not column:
        return rng.choice([f"The {label} is {said}.",
                           f"{label[0].upper()}{label[1:]} is listed with {said}."])
    return rng.choice([f"The {label} {column} is {said}.",
                       f"{label[0].upper()}{label[1:]} has a {column} of {said}.",
                       f"The {column} for {label} is {said}.",
                       f"{label[0].upper()}{label[1:]} is listed with {said} {column}."])


@dataclass(frozen=True)
class Prose:
    text: str
    subject: str
    verb: str
    noun: str
    unit: str
    objects: list[str]
    values: list[int]


def prose(rng: random.Random) -> Prose:
    """One subject's figures: clauses of one sentence (joined by ', and', ', while', ';'
    or a bare 'and'), some restated as sentences of their own."""
    n = rng.randint(2, 5)
    pool = words(rng, n + 5)
    subject, verb, noun, unit = pool[0].capitalize(), pool[1] + "s", pool[2], pool[3]
    objects, vals = pool[4:-1], rng.sample(range(1, 100_000), n)
    if rng.random() < 0.3:
        objects[rng.randrange(n)] += " " + pool[-1]  # a label of two words: "audit trail"
    text = f"{subject} {verb} {objects[0]} {noun} for {vals[0]} {unit}"
    for obj, val in zip(objects[1:], vals[1:], strict=True):
        if rng.random() < 0.25:
            text += f". {subject} {verb} {obj} {noun} for {val} {unit}"
        else:
            sep = rng.choice([", and ", ", while ", "; ", " and ", ", whereas "])
            text += f"{sep}{obj} {noun} for {val} {unit}"
    return Prose(text + ".", subject, verb, noun, unit, objects, vals)


def supported(sentence: str, passage: str) -> float:
    return citations.supported(sentence, ["c"], ["c"], [passage])


def _check_table(rng: random.Random) -> None:
    t = table(rng)
    i = rng.randrange(len(t.labels))
    j = rng.choice([k for k in range(len(t.labels)) if k != i])
    own = about(rng, t.labels[i], t.column, t.values[i])
    other = about(rng, t.labels[i], t.column, t.values[j])
    assert supported(own, t.text) == 1.0, (t.text, own)
    assert supported(other, t.text) == 0.0, (t.text, other)


def _check_prose(rng: random.Random) -> None:
    p = prose(rng)
    i = rng.randrange(len(p.objects))
    j = rng.choice([k for k in range(len(p.objects)) if k != i])
    said = f"{p.subject} {p.verb} {p.objects[i]} {p.noun} for {{}} {p.unit}."
    assert supported(said.format(p.values[i]), p.text) == 1.0, (p.text, i)
    assert supported(said.format(p.values[j]), p.text) == 0.0, (p.text, i, j)


TUNED = st.integers(0, 6_999_999)  # the seeds tuned on; HELD_OUT lies outside them


@settings(max_examples=400, deadline=None)
@given(TUNED)
def test_a_rows_label_is_supported_by_its_own_value_and_not_by_another_rows(
        seed: int) -> None:
    _check_table(random.Random(seed))


@settings(max_examples=400, deadline=None)
@given(TUNED)
def test_a_clauses_subject_is_supported_by_its_own_value_and_not_by_another_clauses(
        seed: int) -> None:
    _check_prose(random.Random(seed))


@settings(max_examples=200, deadline=None)
@given(TUNED)
def test_a_generated_sentence_copied_from_its_passage_stays_supported(
        seed: int) -> None:
    rng = random.Random(seed)
    p = prose(rng)
    for sentence in citations.sentences(p.text):
        assert supported(sentence, p.text) == 1.0, (p.text, sentence)
    t = table(rng)
    for line in t.text.splitlines():
        if "|" in line or line.endswith("."):  # a raw CSV row is no sentence a model writes
            assert supported(line, t.text) == 1.0, (t.text, line)


@settings(max_examples=200, deadline=None)
@given(TUNED)
def test_a_quoted_answer_stays_supported(seed: int) -> None:
    rng = random.Random(seed)
    # What the extractive answer quotes: a table block (one "sentence" of its splitter) or
    # a sentence of prose, marked [1].
    for text in (table(rng).text, prose(rng).text):
        quoted = " ".join(text.split()) + " [1]"
        assert citations.check_quoted(quoted, ["c"], [text]).supported_share == 1.0, text


HELD_OUT = range(7_340_000, 7_340_400)


def test_held_out_seeds_never_tuned_on() -> None:
    """The two properties above over a fixed range of seeds that was never run while the
    check was tuned: a slice of generated tables and prose the rules were not fitted to."""
    failures = []
    for seed in HELD_OUT:
        for check in (_check_table, _check_prose):
            try:
                check(random.Random(seed))
            except AssertionError as failed:
                failures.append((seed, check.__name__, failed.args))
    assert not failures, failures[:5]


def test_the_issues_examples_are_unsupported_and_their_right_values_supported() -> None:
    console = ("| device | released |\n|---|---|\n| Harrier console | 2025-06-30 |\n"
               "| Harrier controller | 2025-03-14 |")
    tiers = "| tier | credit |\n|---|---|\n| Gold | 25% |\n| Silver | 10% |"
    retention = "Grebe keeps audit logs for 400 days, and access logs for 90 days."
    for sentence, passage, share in (
            ("The Harrier console was released on 2025-03-14.", console, 0.0),
            ("The Harrier console was released on 2025-06-30.", console, 1.0),
            ("The Gold tier gives a 10% credit.", tiers, 0.0),
            ("The Gold tier gives a 25% credit.", tiers, 1.0),
            ("The Silver tier gives a 10% credit.", tiers, 1.0),
            ("Grebe keeps audit logs 90 days.", retention, 0.0),
            ("Grebe keeps audit logs for 400 days.", retention, 1.0),
            ("Grebe keeps access logs for 90 days.", retention, 1.0),
            ("Grebe keeps audit and access logs for 90 days.", retention, 0.0)):
        assert supported(sentence, passage) == share, sentence


def test_a_sentence_pairing_each_label_with_its_own_value_is_supported() -> None:
    tiers = "| tier | credit |\n|---|---|\n| Gold | 25% |\n| Silver | 10% |"
    assert supported("Gold gives 25% and Silver gives 10%.", tiers) == 1.0
    assert supported("Gold gives 10% and Silver gives 25%.", tiers) == 0.0
    prose = "Gold gives 25%, and Silver gives 10%."
    assert supported("Silver gives 10%.", prose) == 1.0
    assert supported("Gold gives 10%.", prose) == 0.0


def test_a_value_without_the_label_it_belongs_to_is_not_supported() -> None:
    tiers = "| tier | credit |\n|---|---|\n| Gold | 25% |\n| Silver | 10% |"
    assert supported("The credit is 10%.", tiers) == 0.0  # whose? no row's label said
    assert supported("The credit is 10% for Silver.", tiers) == 1.0


def test_sentences_without_facts_are_judged_by_their_words_as_before() -> None:
    retention = "Grebe keeps audit logs for 400 days, and access logs for 90 days."
    assert supported("it keeps audit logs for days", retention) == 1.0
    assert supported("it deletes everything nightly", retention) == 0.0


def test_a_fact_about_it_is_about_the_subject_of_the_sentence_before() -> None:
    text = ("Tamarin is the cache tier. It keeps cached pages for 35 days. Osprey is the "
            "gateway. It times out a request after 20 seconds.")
    assert supported("Tamarin keeps cached pages for 35 days.", text) == 1.0
    assert supported("Osprey times out a request after 20 seconds.", text) == 1.0
    assert supported("Osprey keeps cached pages for 35 days.", text) == 0.0
    assert supported("Tamarin times out a request after 20 seconds.", text) == 0.0
