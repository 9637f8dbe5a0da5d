"""Documents with planted PII in every form a person still reads as PII, deterministic from a
seed: the measurement behind `scripts/bench_redaction --forms`.

Every (form, type, locale) that makes sense gets `per_cell` values: names in Latin letters and
in the locale's own script, e-mails, phones, cards, IBANs, national ids and secrets
(scripts/benchlib/pii_values.py), written plain, with digits as words, in other digit
scripts, with separator runs, with "@" and "." spelled, with look-alike letters, letter-spaced,
OCR-misread, inside URLs (as browsers escape them, and every character escaped), as base64,
in JSON, CSV and markdown tables, as chat speaker labels, greetings and signatures
(scripts/benchlib/pii_render.py). Variants of a form (the digit script, the separator, the
spelling of "@") are cycled so that each appears at least `per_cell` times.

Seeds: TUNE_SEEDS are for looking at misses and tuning the detection; HELDOUT_SEEDS are
NEVER to be tuned on, looked at value by value, or copied into tests: they are what the
benchmark reports by default, and the only figures to quote.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from scripts.benchlib import pii_values as pv
from scripts.benchlib.pii_render import Rendered, render, variants
from scripts.benchlib.pii_texts import TEXTS

TUNE_SEEDS = range(1, 1000)
HELDOUT_SEEDS = range(424_242, 424_342)  # never tune on these

FORMS = {"plain": "plain", "spelled": "digits as words", "mixed": "words and digits",
         "digits": "other digit scripts", "separators": "separator runs",
         "at_dot": "@ and . spelled", "lookalike": "look-alike letters",
         "spaced": "letter-spaced", "ocr": "OCR misreads (extra)", "url": "URL query value",
         "percent": "percent-encoded", "json": "JSON", "csv": "CSV",
         "markdown": "markdown table", "chat": "chat speaker label", "greeting": "greeting",
         "signature": "signature", "base64": "base64 (out of scope)"}
# Reported but left out of the totals: base64 is declared out of scope by the issue; digits
# misread as look-alike letters (O for 0, l for 1) go beyond what the issue asks for.
OUT_OF_SCOPE = ("ocr", "base64")
TYPES = {"person": "name (Latin)", "person_own": "name (own script)", "email": "e-mail",
         "phone": "phone", "card": "card", "iban": "IBAN", "us_ssn": "US SSN",
         "de_tax_id": "DE Steuer-ID", "br_cpf": "BR CPF", "br_cnpj": "BR CNPJ",
         "in_aadhaar": "IN Aadhaar", "cn_resident_id": "CN resident id", "kr_rrn": "KR RRN",
         "ru_passport": "RU passport", "secret": "secret"}
NUMBER_FORMS = ("plain", "spelled", "mixed", "digits", "separators", "spaced", "ocr", "url",
                "percent", "json", "csv", "markdown", "base64")
PERSON_FORMS = ("plain", "spaced", "url", "percent", "json", "csv", "markdown", "chat",
                "greeting", "signature", "base64")
EMAIL_FORMS = ("plain", "at_dot", "lookalike", "spaced", "url", "percent", "json", "csv",
               "markdown", "signature", "base64")
SECRET_FORMS = ("plain", "url", "percent", "json", "csv", "markdown", "base64")
ONE_LINE = ("url", "percent", "csv", "markdown")  # no PEM block there
PROSE = ("plain", "spelled", "mixed", "digits", "separators", "at_dot", "lookalike", "spaced",
         "ocr", "url", "percent", "base64")
PARAMS = {"person": "name", "person_own": "name", "email": "email", "phone": "phone",
          "card": "card", "iban": "iban", "us_ssn": "ssn", "de_tax_id": "steuer_id",
          "br_cpf": "cpf", "br_cnpj": "cnpj", "in_aadhaar": "aadhaar",
          "cn_resident_id": "sfz", "kr_rrn": "rrn", "ru_passport": "passport",
          "secret": "api_key"}


def forms_for(type_: str) -> tuple[str, ...]:
    if type_ in ("person", "person_own"):
        return PERSON_FORMS
    if type_ == "email":
        return EMAIL_FORMS
    if type_ == "secret":
        return SECRET_FORMS
    return (*NUMBER_FORMS, "signature") if type_ == "phone" else NUMBER_FORMS


def types_for(spec: pv.LocaleSpec) -> list[str]:
    return ["person", *(["person_own"] if spec.own_script else []), "email", "phone", "card",
            *(["iban"] if spec.ibans else []), *spec.ids, "secret"]


Span = tuple[int, int]


@dataclass(frozen=True)
class Order:
    locale: str
    type: str
    form: str
    variant: str
    kind: str = ""  # secrets: which kind
    sweep: bool = False  # added so that a variant is seen often enough (not in the matrix)


@dataclass(frozen=True)
class Planted:
    locale: str
    type: str
    form: str
    variant: str
    kind: str
    sweep: bool
    value: str  # as the generator made it, before the form
    rendered: str  # as written in the document
    spans: tuple[tuple[int, int], ...]  # where `rendered` stands (each occurrence)
    units: tuple[tuple[int, int], ...]  # the ranges of the text that identify


@dataclass(frozen=True)
class PlantedDoc:
    text: str
    container: str
    locale: str
    planted: tuple[Planted, ...]


def plan(rng: random.Random, per_cell: int, locales: list[str]) -> list[Order]:
    orders: list[Order] = []
    turn: Counter[str] = Counter()
    secret_turn = 0
    for loc in locales:
        for type_ in types_for(pv.LOCALES[loc]):
            for form in forms_for(type_):
                for _ in range(per_cell):
                    kind = ""
                    if type_ == "secret":
                        kinds = [k for k in pv.SECRET_KINDS
                                 if not (k == "pem_key" and form in ONE_LINE)]
                        kind, secret_turn = kinds[secret_turn % len(kinds)], secret_turn + 1
                    orders.append(Order(loc, type_, form, _variant(form, loc, turn), kind))
    return orders + _sweep(rng, orders, per_cell, locales)


def _variant(form: str, locale: str, turn: Counter[str]) -> str:
    names = variants(form, locale)
    k = turn[form]
    turn[form] += 1
    if form == "digits":  # half in the locale's own digits, the rest through every script
        return names[0] if k % 2 == 0 else sorted(names)[(k // 2) % len(names)]
    return names[k % len(names)]


def _sweep(rng: random.Random, orders: list[Order], per_cell: int,
           locales: list[str]) -> list[Order]:
    """More values for each variant seen fewer than `per_cell` times."""
    seen = Counter((o.form, o.variant) for o in orders)
    extra = []
    for form in FORMS:
        names = sorted({v for loc in locales for v in variants(form, loc)})
        for name in names:
            cells = [(loc, t) for loc in locales if name in variants(form, loc)
                     for t in types_for(pv.LOCALES[loc]) if form in forms_for(t)
                     and t != "secret"]
            for _ in range(per_cell - seen[(form, name)]):
                loc, type_ = rng.choice(cells)
                extra.append(Order(loc, type_, form, name, sweep=True))
    return extra


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.at = 0
        self.found: dict[int, tuple[Order, pv.Value, Rendered, list[Span], list[Span]]] = {}

    def text(self, piece: str) -> None:
        self.parts.append(piece)
        self.at += len(piece)

    def value(self, key: int, order: Order, value: pv.Value, r: Rendered) -> None:
        entry = self.found.setdefault(key, (order, value, r, [], []))
        entry[3].append((self.at, self.at + len(r.text)))
        entry[4].extend((self.at + a, self.at + b) for a, b in r.units)
        self.text(r.text)

    def done(self, container: str, locale: str) -> PlantedDoc:
        planted = tuple(Planted(o.locale, o.type, o.form, o.variant, v.kind, o.sweep, v.text,
                                r.text, tuple(spans), tuple(units))
                        for o, v, r, spans, units in self.found.values())
        return PlantedDoc("".join(self.parts), container, locale, planted)


@dataclass
class _Maker:
    rng: random.Random
    seed: int
    people: dict[str, pv.People] = field(default_factory=dict)

    def value(self, order: Order) -> pv.Value:
        spec, rng = pv.LOCALES[order.locale], self.rng
        if order.locale not in self.people:
            self.people[order.locale] = pv.People(spec, self.seed)
        people = self.people[order.locale]
        given_only = order.form in ("chat", "greeting") and rng.random() < 0.5
        if order.type == "person":
            return people.latin(rng, given_only)
        if order.type == "person_own":
            return people.own_script(rng, given_only)
        if order.type == "email":
            return pv.email(people, rng)
        if order.type == "phone":
            return pv.phone(rng.choice(spec.regions), rng)
        if order.type == "card":
            return pv.card(spec, rng)
        if order.type == "iban":
            return pv.iban(spec, rng)
        if order.type == "secret":
            return pv.secret(order.kind or rng.choice(pv.SECRET_KINDS), rng)
        return pv.national(order.type, rng)

    def rendered(self, order: Order) -> tuple[pv.Value, Rendered]:
        value = self.value(order)
        return value, render(value, order.form, order.variant, order.locale, self.rng)


def _frame(w: _Writer, frame: str, label: str, key: int, order: Order,
           made: tuple[pv.Value, Rendered]) -> None:
    """`frame` with its {label} filled in and the value written at its {v}."""
    head, tail = frame.replace("{label}", label).split("{v}")
    w.text(head)
    w.value(key, order, *made)
    w.text(tail)


def _prose(m: _Maker, orders: list[Order]) -> PlantedDoc:
    loc = orders[0].locale
    texts, rng, w = TEXTS[loc], m.rng, _Writer()
    w.text(f"{texts.title}\n\n")
    for k, order in enumerate(orders):
        made = m.rendered(order)
        label = texts.labels[order.type]
        put = (k, order, made)
        if order.form in ("url", "percent"):
            host = f"crm.example.{rng.choice(['com', 'net', 'org'])}"
            param = PARAMS[order.type]
            line = rng.choice([f"{label}: https://{host}/customers/search?{param}={{v}}&page=2",
                               f'GET /api/v1/lookup?{param}={{v}}&lang={loc} HTTP/1.1" 200 512'])
            _frame(w, line, label, *put)
        elif order.form == "base64":
            _frame(w, rng.choice(["context: {v}", "X-Debug-Context: {v}", texts.value_frames[0]]),
                   label, *put)
        elif order.type in ("person", "person_own"):
            _frame(w, rng.choice(texts.person_frames), label, *put)
        else:
            frames = texts.value_frames if order.kind != "pem_key" else texts.value_frames[:1]
            _frame(w, rng.choice(frames), label, *put)
        w.text("\n")
        if k % 3 == 1:
            w.text(rng.choice(texts.filler) + "\n")
    return w.done("prose", loc)


def _columns(orders: list[Order]) -> dict[str, list[int]]:
    cols: dict[str, list[int]] = defaultdict(list)
    for k, o in enumerate(orders):
        cols[PARAMS[o.type]].append(k)
    return cols


def _json(m: _Maker, orders: list[Order]) -> PlantedDoc:
    loc, w = orders[0].locale, _Writer()
    pretty = m.rng.random() < 0.6
    nl, ind = ("\n", "  ") if pretty else ("", "")
    sp = " " if pretty else ""
    w.text(f'{{{nl}{ind}"ticket":{sp}"T-{m.rng.randint(1000, 9999)}",{nl}{ind}"locale":{sp}'
           f'"{loc}",{nl}{ind}"customer":{sp}{{{nl}')
    seen: Counter[str] = Counter()
    for k, order in enumerate(orders):
        name = PARAMS[order.type]
        seen[name] += 1
        key = name if seen[name] == 1 else f"{name}_{seen[name]}"
        value, r = m.rendered(order)
        w.text(f'{ind * 2}"{key}":{sp}"')
        w.value(k, order, value, r)
        w.text('"' + ("," if k < len(orders) - 1 else "") + nl)
    w.text(f"{ind}}}{nl}}}\n")
    return w.done("json", loc)


def _table(m: _Maker, orders: list[Order], markdown: bool) -> PlantedDoc:
    loc, w = orders[0].locale, _Writer()
    cols = _columns(orders)
    rows = max(len(ks) for ks in cols.values())
    delim = ";" if loc in ("de", "fr", "es", "pt-BR", "ru") and not markdown else ","
    made = {k: m.rendered(o) for k, o in enumerate(orders)}
    head = ["id", *cols, "updated_at"]
    if markdown:
        w.text("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
    else:
        w.text(delim.join(head) + "\n")
    for row in range(rows):
        w.text("| " if markdown else "")
        w.text(f"{row + 1}")
        for ks in cols.values():
            w.text(" | " if markdown else delim)
            if row < len(ks):
                value, r = made[ks[row]]
                quoted = not markdown and any(c in r.text for c in (delim, '"', "\n"))
                w.text('"' if quoted else "")
                w.value(ks[row], orders[ks[row]], value, r)
                w.text('"' if quoted else "")
        day = f"2026-{m.rng.randint(1, 12):02d}-{m.rng.randint(1, 28):02d}"
        w.text((" | " if markdown else delim) + day + (" |\n" if markdown else "\n"))
    return w.done("markdown" if markdown else "csv", loc)


CHAT_LABELS = ("[{t}] {v}: ", "{t} {v}: ", "<{v}> ", "{v} ({t}): ")


def _chat(m: _Maker, orders: list[Order]) -> PlantedDoc:
    loc, rng, w = orders[0].locale, m.rng, _Writer()
    texts = TEXTS[loc]
    label = rng.choice(CHAT_LABELS)
    made = [m.rendered(o) for o in orders]
    hour, minute = rng.randint(7, 20), rng.randint(0, 40)
    turns = [k % len(orders) for k in range(len(orders) + rng.randint(1, 3))]
    for n, k in enumerate(turns):
        stamp = f"{hour:02d}:{minute + n:02d}"
        _frame(w, label.replace("{t}", stamp), "", k, orders[k], made[k])
        w.text(texts.chat[n % len(texts.chat)] + "\n")
    return w.done("chat", loc)


def _letter(m: _Maker, greeting: Order | None, signature: list[Order], loc: str) -> PlantedDoc:
    texts, rng, w = TEXTS[loc], m.rng, _Writer()
    if greeting is not None:
        _frame(w, texts.greeting, "", 0, greeting, m.rendered(greeting))
        w.text("\n\n")
    w.text("\n".join(rng.sample(texts.filler, len(texts.filler))) + "\n\n" + texts.closing + "\n")
    order_of = {"person": 0, "person_own": 0, "phone": 1, "email": 2}
    for k, order in sorted(enumerate(signature, 1), key=lambda ko: order_of[ko[1].type]):
        value, r = m.rendered(order)
        w.text(rng.choice(["Tel. ", "☎ ", "M: ", ""]) if order.type == "phone" else "")
        w.value(k, order, value, r)
        w.text("\n")
    return w.done("letter", loc)


def _container(m: _Maker, form: str, orders: list[Order]) -> PlantedDoc:
    if form in ("csv", "markdown"):
        return _table(m, orders, form == "markdown")
    return _json(m, orders) if form == "json" else _chat(m, orders)


def generate(seed: int, per_cell: int = 3, locales: list[str] | None = None) -> list[PlantedDoc]:
    """Documents planting `per_cell` values in every (form, type, locale); the same
    arguments give the same documents."""
    rng = random.Random(f"pii_planted/{seed}")
    locales = list(locales or pv.LOCALES)
    orders = plan(rng, per_cell, locales)
    rng.shuffle(orders)
    m = _Maker(rng, seed)
    docs: list[PlantedDoc] = []
    for loc in locales:
        mine = [o for o in orders if o.locale == loc]
        prose = [o for o in mine if o.form in PROSE]
        docs += [_prose(m, prose[i:i + 6]) for i in range(0, len(prose), 6)]
        for form, size in (("json", 5), ("csv", 6), ("markdown", 6), ("chat", 3)):
            group = [o for o in mine if o.form == form]
            docs += [_container(m, form, group[i:i + size]) for i in range(0, len(group), size)]
        greetings = [o for o in mine if o.form == "greeting"]
        signatures = [o for o in mine if o.form == "signature"]
        letters = max(len(greetings), -(-len(signatures) // 3))
        docs += [_letter(m, greetings[i] if i < len(greetings) else None,
                         signatures[3 * i:3 * i + 3], loc) for i in range(letters)]
    rng.shuffle(docs)
    return docs
