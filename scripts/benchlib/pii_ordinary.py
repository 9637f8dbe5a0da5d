"""Ordinary tokens in business sentences, seeded: the false-positive rate per kind of token
(`scripts/bench_redaction --precision`).

Kinds: amounts in many locales' layouts (dot, comma, space, no-break space and apostrophe
thousands; sign, ISO code or local abbreviation before or after), ISBNs and ISSNs (checksummed,
with and without their label), versions after a version word, dates, order and invoice
numbers, timestamps and table labels (tiers, statuses, RAG colours). A token counts as a
false positive when any finding overlaps it. Seeds 0-99 are for tuning (`--tune`), seeds
1000-1099 only for the figures reported.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from collections import Counter
from collections.abc import Callable

TUNE_SEEDS = range(0, 100)
HELDOUT_SEEDS = range(1000, 1100)

# (thousands separator, decimal mark) of a locale's amounts
_LAYOUTS = ((",", "."), (".", ","), (" ", ","), ("\u00a0", ","), ("\u202f", ","), ("'", "."),
            ("", "."), ("", ","))
# (currency, written after the number?)
_CURRENCIES = (("$", False), ("US$", False), ("€", False), ("€", True), ("£", False),
               ("¥", False), ("₹", False), ("Rp", False), ("₫", True), ("đ", True),
               ("R$", False), ("zł", True), ("Kč", True), ("kr", True), ("Ft", True),
               ("lei", True), ("₺", True), ("TL", True), ("₪", False), ("฿", False),
               ("руб.", True), ("₽", True), ("грн", True), ("CHF", False), ("USD", False),
               ("EUR", True), ("IDR", False), ("VND", True), ("MXN", False), ("BRL", False),
               ("PLN", True), ("THB", False), ("INR", False), ("JPY", False), ("GBP", False),
               ("Rs.", False), ("₩", False), ("元", True), ("円", True))


def _grouped(n: int, sep: str, indian: bool = False) -> str:
    s = str(n)
    if indian and len(s) > 3:
        head, tail = s[:-3], s[-3:]
        pairs = [head[max(0, i - 2):i] for i in range(len(head), 0, -2)][::-1]
        return sep.join([*pairs, tail])
    return f"{n:,}".replace(",", sep)


def _amount(r: random.Random) -> str:
    n = r.randint(1000, 9_999_999_999)
    sep, dec = r.choice(_LAYOUTS)
    body = _grouped(n, sep, indian=sep == "," and r.random() < 0.2)
    if r.random() < 0.4:
        body += f"{dec}{r.randint(0, 99):02d}"
    cur, after = r.choice(_CURRENCIES)
    gap = r.choice(["", " ", "\u00a0"]) if len(cur) == 1 else r.choice([" ", "\u00a0"])
    return f"{body}{gap}{cur}" if after else f"{cur}{gap}{body}"


def _ean(body: str) -> str:
    return str((10 - sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(body)) % 10) % 10)


def _isbn(r: random.Random) -> str:
    body = r.choice(["978", "979"]) + "".join(r.choice(string.digits) for _ in range(9))
    full = body + _ean(body)
    ten = full[3:12]
    c10 = (11 - sum(int(c) * (10 - i) for i, c in enumerate(ten)) % 11) % 11
    issn7 = "".join(r.choice(string.digits) for _ in range(7))
    c8 = (11 - sum(int(c) * (8 - i) for i, c in enumerate(issn7)) % 11) % 11
    issn = f"{issn7[:4]}-{issn7[4:]}{'X' if c8 == 10 else c8}"
    hyphen = f"{full[:3]}-{full[3]}-{full[4:8]}-{full[8:12]}-{full[12]}"
    return r.choice([f"ISBN {hyphen}", f"ISBN {full}", f"ISBN-13: {hyphen}",
                     f"ISBN-10: {ten}{'X' if c10 == 10 else c10}", hyphen, full,
                     f"ISSN {issn}", f"ISSN: {issn}", f"e-ISSN {issn}",
                     f"{full[:3]} {full[3:5]} {full[5:9]} {full[9:12]} {full[12]}"])


def _version(r: random.Random) -> str:
    parts = ".".join(str(r.randint(0, 255 if r.random() < 0.7 else 20000))
                     for _ in range(r.choice([3, 4, 4])))
    cue = r.choice(["firmware", "Firmware", "version", "Version:", "v", "build", "Build",
                    "release", "firmware version", "BIOS", "kernel", "driver", "rev."])
    return f"{cue}{'' if cue == 'v' else ' '}{parts}"


def _date(r: random.Random) -> str:
    y, m, d = r.randint(1950, 2035), r.randint(1, 12), r.randint(1, 28)
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    return r.choice([f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}", f"{m:02d}/{d:02d}/{y}",
                     f"{d:02d}/{m:02d}/{y}", f"{y}/{m:02d}/{d:02d}", f"{d}.{m}.{y}",
                     f"{d} {months[m - 1]} {y}", f"{months[m - 1]} {d}, {y}",
                     f"{y}年{m}月{d}日", f"{d:02d}-{m:02d}-{y}", f"{y}{m:02d}{d:02d}"])


def _order(r: random.Random) -> str:
    n = "".join(r.choice(string.digits) for _ in range(r.randint(6, 11)))
    n = str(r.randint(1, 9)) + n[1:]
    year = r.randint(2019, 2027)
    return r.choice([f"order {n}", f"Order #{n}", f"PO {n}", f"PO number {n}",
                     f"invoice INV-{year}-{n[:5]}", f"ORD-{year}-{n}", f"ticket #{n}",
                     f"order no. {n[:3]}-{n[3:]}", f"SO-{n}", f"Invoice No. {year}/{n[:6]}",
                     f"case {n}", f"tracking number {n}"])


def _timestamp(r: random.Random) -> str:
    s = r.randint(1_000_000_000, 1_900_000_000)
    y, mo, d = r.randint(2015, 2030), r.randint(1, 12), r.randint(1, 28)
    h, mi, se = r.randint(0, 23), r.randint(0, 59), r.randint(0, 59)
    zone = r.choice(["Z", "+00:00", "+05:30", "-03:00", "+09:00", ""])
    return r.choice([str(s), str(s * 1000 + r.randint(0, 999)),
                     f"{y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{se:02d}{zone}",
                     f"{y}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{se:02d}.{r.randint(0, 999):03d}",
                     f"{y}{mo:02d}{d:02d}T{h:02d}{mi:02d}{se:02d}Z",
                     f"{d:02d}/{mo:02d}/{y} {h:02d}:{mi:02d}", f"ts={s}"])


LABELS = ("Bronze", "Silver", "Gold", "Platinum", "Diamond", "Basic", "Standard", "Premium",
          "Enterprise", "Starter", "Pro", "Free", "Total", "Subtotal", "Small", "Medium",
          "Large", "High", "Low", "Critical", "Open", "Closed", "Pending", "Active", "Draft",
          "Approved", "Rejected", "Red", "Amber", "Green", "North", "South", "East", "West",
          "Central", "EMEA", "APAC", "Retail", "Wholesale", "Online", "Q1", "Q2", "Q3", "Q4",
          "Tier 1", "Tier 2", "Tier 3", "Budget", "Actual", "Variance", "Forecast")


def _label(r: random.Random) -> str:
    return r.choice(LABELS)


KINDS: dict[str, Callable[[random.Random], str]] = {
    "amount": _amount, "isbn/issn": _isbn, "version": _version, "date": _date,
    "order number": _order, "timestamp": _timestamp, "table label": _label,
}
SENTENCES = (
    "The invoice total was {t} for the quarter.", "Please approve {t} before Friday.",
    "Budget line: {t}", "We recorded {t} in the ledger yesterday.", "{t}",
    "Refund of {t} was issued after review.", "See {t} in the attached report.",
    '{{"item": "{t}", "status": "ok"}}', "| Item | {t} |\n|---|---|",
    "kind,value\nrow,{t}\n", "Updated on {t} by the finance team.",
    "The supplier confirmed {t} and shipped the goods.", "Note: {t} (per contract)",
)
TABLES = ("| Tier | Price | Seats |\n|---|---|---|\n| {t} | 120 | 5 |\n| Other | 80 | 3 |",
          "segment,revenue,growth\n{t},1200,4%\nOther,800,2%\n",
          "Status: {t}", "{t}\t1200\t4%", "<td>{t}</td><td>1200</td>",
          "Plan {t} includes support.", "{t}: 1,200 units")


def texts(kind: str, seeds: range, per_seed: int) -> list[tuple[str, str]]:
    """(text, token) pairs: `per_seed` sentences per seed, each with one token of `kind`."""
    out = []
    for seed in seeds:
        rng = random.Random(f"precision/{kind}/{seed}")
        for _ in range(per_seed):
            token = KINDS[kind](rng)
            frame = rng.choice(TABLES if kind == "table label" else SENTENCES)
            out.append((frame.format(t=token), token))
    return out


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench_redaction --precision", description=__doc__)
    p.add_argument("--per-seed", type=int, default=10, help="tokens per kind and seed")
    p.add_argument("--tune", action="store_true", help="tuning seeds 0-99, not 1000-1099")
    p.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS))
    p.add_argument("--show", type=int, default=3, help="examples of masked tokens per kind")
    p.add_argument("--json", help="write the figures here")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    from services.redaction.redactor import Redactor
    from services.redaction.settings import RedactionSettings

    args = parse(argv)
    redactor = Redactor(RedactionSettings())
    seeds = TUNE_SEEDS if args.tune else HELDOUT_SEEDS
    print(f"seeds {seeds.start}-{seeds.stop - 1}, {args.per_seed} tokens per kind and seed\n")
    print("| ordinary token | masked | rate | as | examples |\n|---|---|---|---|---|")
    figures: dict[str, object] = {}
    for kind in args.kinds:
        pairs = texts(kind, seeds, args.per_seed)
        masked, types, bad = 0, Counter[str](), []
        for i in range(0, len(pairs), 32):
            batch = pairs[i:i + 32]
            for (text, token), found in zip(batch, redactor.analyze([t for t, _ in batch]),
                                            strict=True):
                at = text.index(token)
                hit = {r.entity_type for r in found if r.start < at + len(token) and r.end > at}
                if hit:
                    masked += 1
                    types.update(hit)
                    bad.append(token)
        n = len(pairs)
        figures[kind] = {"masked": masked, "n": n, "as": dict(types)}
        print(f"| {kind} | {masked}/{n} | {100 * masked / n:.2f}% | "
              f"{', '.join(f'{t} {c}' for t, c in types.most_common())} | {bad[:args.show]} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
