"""Ordinary business text that redaction must leave alone: timelines, tickets, changelogs and
configs with dates, timestamps, order and ticket numbers, builds, versions, SKUs, ports,
durations, amounts, PO numbers, product names, commit hashes, UUIDs and the like, each token
planted at a known place (the false-positive side of `scripts/bench_redaction --forms`),
and abstracts of a BEIR corpus as technical prose.

IP addresses are not among them: an IP address is personal data here (IP_ADDRESS is
redacted on purpose), so masking one is no false positive. Seeds as in
scripts/benchlib/pii_planted.py (TUNE_SEEDS / HELDOUT_SEEDS); abstracts from line
HELDOUT_ABSTRACTS_FROM of the corpus on are for held-out seeds only.
"""

from __future__ import annotations

import json
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scripts.benchlib.pii_planted import HELDOUT_SEEDS

HELDOUT_ABSTRACTS_FROM = 4000  # tuning may read lines 0-3999 of the corpus, never the rest
PRODUCTS = ("Nimbus", "Aurora", "Atlas", "Orion", "Helix", "Cobalt", "Zephyr", "Quartz",
            "Falcon", "Meridian", "Tundra", "Lumen", "Vega", "Basalt", "Halcyon", "Kestrel")
# Codenames that are also given names: a reader knows from the sentence they are products.
NAME_LIKE = ("Jasper", "Hugo", "Iris", "Felix", "Matilda", "Otto", "Clara", "Leo", "Stella",
             "Bruno", "Elsa", "Rosalind", "Marlowe", "Ingrid")
PRODUCT_PHRASES = ("the {p} ingestion cluster", "{p} gateway", "Project {p}",
                   "the {p} v2 dashboard", "{p} scheduler")
HEX = "0123456789abcdef"


def _d(rng: random.Random) -> tuple[int, int, int]:
    return rng.randint(2019, 2027), rng.randint(1, 12), rng.randint(1, 28)


def _iso_date(rng: random.Random) -> str:
    return "{:04d}-{:02d}-{:02d}".format(*_d(rng))


def _timestamp(rng: random.Random) -> str:
    y, m, d = _d(rng)
    t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    frac = rng.choice(["", f".{rng.randint(0, 999):03d}"])
    zone = rng.choice(["Z", "+00:00", "+05:30", "-03:00", "+09:00", "+01:00"])
    return rng.choice([f"{y:04d}-{m:02d}-{d:02d}T{t}{frac}{zone}", f"{y:04d}-{m:02d}-{d:02d} {t}"])


def _local_date(rng: random.Random) -> str:
    y, m, d = _d(rng)
    return rng.choice([f"{d:02d}.{m:02d}.{y}", f"{m:02d}/{d:02d}/{y}", f"{d:02d}/{m:02d}/{y}",
                       f"{y}年{m}月{d}日", f"{d} {['Jan', 'Mar', 'Jun', 'Sep', 'Dec'][m % 5]} {y}"])


def _amount(rng: random.Random) -> str:
    n = rng.randint(100, 9_999_999) / 100
    us = f"{n:,.2f}"
    eu = us.replace(",", " ").replace(".", ",").replace(" ", ".")
    return rng.choice([f"${us}", f"€{eu}", f"{eu} €", f"R$ {eu}", f"₹{us}", f"¥{int(n):,}",
                       f"{us} USD", f"£{us}", f"{eu.replace('.', ' ')} ₽", f"CHF {us}"])


def _duration(rng: random.Random) -> str:
    return rng.choice([f"{rng.randint(1, 9)}h{rng.randint(1, 59)}m", f"{rng.randint(5, 5000)} ms",
                       f"{rng.randint(1, 90)}.{rng.randint(0, 9)} s", f"PT{rng.randint(1, 59)}M",
                       f"{rng.randint(2, 120)} min", f"{rng.randint(1, 14)}d"])


def _semver(rng: random.Random) -> str:
    core = f"{rng.randint(0, 12)}.{rng.randint(0, 40)}.{rng.randint(0, 30)}"
    return rng.choice([core, f"v{core}", f"{core}-rc.{rng.randint(1, 5)}",
                       f"{core}+build.{rng.randint(1, 999)}"])


def _sku(rng: random.Random) -> str:
    up = string.ascii_uppercase
    return rng.choice([f"SKU-{rng.randint(10000, 99999)}-{rng.choice(['BLK', 'WHT', 'RED'])}",
                       f"{rng.choice(up)}{rng.choice(up)}-{rng.randint(1000, 9999)}-"
                       f"{rng.choice(['XS', 'M', 'XL'])}",
                       f"{rng.randint(100000, 999999)}-{rng.randint(10, 99)}"])


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HEX) for _ in range(n))


KINDS: dict[str, tuple[str, Callable[[random.Random], str]]] = {
    "iso_date": ("ISO 8601 date", _iso_date),
    "timestamp": ("ISO 8601 timestamp", _timestamp),
    "local_date": ("date, local format", _local_date),
    "clock": ("clock time", lambda r: f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}"),
    "order": ("order number",
              lambda r: f"ORD-{r.randint(2019, 2027)}-{r.randint(100000, 999999)}"),
    "ticket": ("ticket key (ABC-1234)",
               lambda r: f"{r.choice(['OPS', 'PAY', 'INFRA', 'CORE', 'SEC'])}-"
                         f"{r.randint(10, 9999)}"),
    "ticket_hash": ("ticket #number", lambda r: f"#{r.randint(1000, 99999)}"),
    "build": ("build number", lambda r: f"{r.randint(2019, 2027)}{r.randint(1, 12):02d}"
                                        f"{r.randint(1, 28):02d}.{r.randint(1, 20)}"),
    "semver": ("semantic version", _semver),
    "sku": ("SKU", _sku),
    "port": ("port", lambda r: str(r.choice([443, 5432, 6379, 8080, 8443, 9092, 27017,
                                             r.randint(1024, 65535)]))),
    "duration": ("duration", _duration),
    "amount": ("amount", _amount),
    "po": ("PO number (10 digits)", lambda r: f"45{r.randint(0, 99_999_999):08d}"),
    "invoice": ("invoice number",
                lambda r: f"INV-{r.randint(2019, 2027)}-{r.randint(1, 99999):05d}"),
    "product": ("product name", lambda r: r.choice(PRODUCTS)),
    "codename": ("codename that is a given name", lambda r: r.choice(NAME_LIKE)),
    "commit": ("commit hash", lambda r: _hex(r, r.choice([7, 8, 12, 40]))),
    "uuid": ("UUID", lambda r: str(uuid.UUID(bytes=r.randbytes(16), version=4))),
    "digest": ("image digest", lambda r: "sha256:" + _hex(r, 64)),
    "percent": ("percentage", lambda r: f"{r.randint(0, 100)}.{r.randint(0, 99):02d}%"),
    "count": ("count with separators", lambda r: f"{r.randint(1000, 99_999_999):,}"),
    "config_number": ("config number", lambda r: str(r.choice([30000, 604800000, 1048576,
                                                               86400, 65535, 2147483647]))),
    "http": ("status or error code", lambda r: r.choice(["HTTP 502", "HTTP 429", "E4021",
                                                         "ERR_CONN_RESET", "ORA-12541"])),
    "pod": ("pod name", lambda r: f"payments-{_hex(r, 9)}-{_hex(r, 5)}"),
    "path": ("file path with line", lambda r: f"src/billing/retry_{r.randint(1, 9)}.py:"
                                              f"{r.randint(10, 999)}"),
    "host": ("host name", lambda r: f"db-replica-{r.randint(1, 20):02d}.eu-west-1.internal"),
    "cron": ("cron expression", lambda r: f"{r.randint(0, 59)} {r.randint(0, 23)} * * *"),
}

LINES = {
    "timeline": ("{timestamp} deploy of build {build} to {product} started",
                 "{clock} UTC: error rate on {codename} rose to {percent} ({http})",
                 "{iso_date} {clock}: rolled back to {semver} after {duration}",
                 "{clock} {ticket} opened; order {order} was charged twice ({amount})",
                 "{timestamp}: {host} lagged {duration} behind, commit {commit}",
                 "{clock} {pod} restarted {count} times since {iso_date}"),
    "ticket": ("Ticket {ticket}: PO {po} has waited for approval since {iso_date}.",
               "Order {order} for SKU {sku} was refunded ({amount}).",
               "{product} returns 503 on port {port} after {duration}.",
               "Request {uuid} failed with {http} in {path}.",
               "Invoice {invoice} for {amount} is due on {local_date}.",
               "See {ticket_hash}; {codename} is blocked until {local_date}."),
    "changelog": ("## {semver} ({iso_date})", "- Fix retry storm in {product} ({commit})",
                  "- Raise the timeout to {duration}; see {ticket}",
                  "- Merge {commit} from {codename}", "- Publish build {build} as {digest}",
                  "- Drop {count} stale rows from the {product} cache"),
    "config": ("service: {product}", "port: {port}", "timeout_ms: {config_number}",
               "release: \"{semver}\"", "build_id: \"{build}\"", "commit: {commit}",
               "instance_id: {uuid}", "schedule: \"{cron}\"", "owner_team: {codename}",
               "retention_ms: {config_number}"),
}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    span: tuple[int, int]


@dataclass(frozen=True)
class BusinessDoc:
    text: str
    container: str
    tokens: tuple[Token, ...]


def _line(rng: random.Random, line: str, at: int) -> tuple[str, list[Token]]:
    out, tokens, pos = [], [], 0
    for m in re.finditer(r"\{(\w+)\}", line):
        out.append(line[pos:m.start()])
        at += len(line[pos:m.start()])
        kind = m.group(1)
        text = KINDS[kind][1](rng)
        if kind in ("product", "codename") and not line.startswith(("service", "owner")):
            phrase = rng.choice(PRODUCT_PHRASES)
            lead = phrase.index("{p}")
            out.append(phrase.replace("{p}", text))
            tokens.append(Token(kind, text, (at + lead, at + lead + len(text))))
            at += len(phrase) - 3 + len(text)
        else:
            out.append(text)
            tokens.append(Token(kind, text, (at, at + len(text))))
            at += len(text)
        pos = m.end()
    out.append(line[pos:])
    return "".join(out), tokens


def business(seed: int, n: int) -> list[BusinessDoc]:
    """n timelines, tickets, changelogs and configs; the same arguments give the same."""
    rng = random.Random(f"pii_business/{seed}")
    docs = []
    for k in range(n):
        container = list(LINES)[k % len(LINES)]
        lines = rng.sample(LINES[container], min(6, len(LINES[container])))
        text, tokens = "", []
        for line in lines:
            written, found = _line(rng, line, len(text))
            text += written + "\n"
            tokens += found
        docs.append(BusinessDoc(text, container, tuple(tokens)))
    return docs


def abstracts(corpus: Path, seed: int, n: int) -> list[str]:
    """n abstracts (title and text) of a BEIR corpus.jsonl: for a held-out seed from line
    HELDOUT_ABSTRACTS_FROM on, for any other seed from the lines before it."""
    with corpus.open() as f:
        rows = [json.loads(line) for line in f]
    held = seed in HELDOUT_SEEDS
    pool = rows[HELDOUT_ABSTRACTS_FROM:] if held else rows[:HELDOUT_ABSTRACTS_FROM]
    picked = random.Random(f"pii_abstracts/{seed}").sample(pool, min(n, len(pool)))
    return [f"{r.get('title', '')}\n{r['text']}" for r in picked]
