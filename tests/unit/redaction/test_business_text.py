"""Ordinary business tokens are never masked: ISO 8601 dates and timestamps, order, ticket,
PO, invoice, build and version numbers, SKUs, ports, durations, amounts, commit ids and
UUIDs, in the timelines, tickets, changelogs and configs they stand in.

The tokens are drawn by hypothesis from their own grammars (random digits, so that no list
of "known good" values is what passes); a masked token is a false positive."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings

SLOW = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def _d(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def token(kind: str, rng: random.Random) -> str:
    y, mo, d = rng.randint(2019, 2030), rng.randint(1, 12), rng.randint(1, 28)
    h, mi, s = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    date = f"{y}-{mo:02d}-{d:02d}"
    out = {
        "date": date,
        "timestamp": rng.choice([f"{date}T{h:02d}:{mi:02d}:{s:02d}Z",
                                 f"{date} {h:02d}:{mi:02d}:{s:02d}.{_d(rng, 3)}+05:30",
                                 f"{date}T{h:02d}:{mi:02d}:{s:02d}-03:00",
                                 f"{y}{mo:02d}{d:02d}T{h:02d}{mi:02d}{s:02d}Z"]),
        "other date": rng.choice([f"{d:02d}.{mo:02d}.{y}", f"{mo:02d}/{d:02d}/{y}",
                                  f"{y}/{mo:02d}/{d:02d}", f"{y}{mo:02d}{d:02d}"]),
        "unix time": str(rng.randint(1_500_000_000, 1_900_000_000))
                     + rng.choice(["", _d(rng, 3)]),
        "order": rng.choice([f"ORD-{y}-{_d(rng, 6)}", f"order #{_d(rng, 5)}",
                             f"order number {_d(rng, 10)}", f"SO-{_d(rng, 8)}"]),
        "po": rng.choice([f"PO {rng.choice('4578')}{_d(rng, 9)}", f"PO-{_d(rng, 10)}",
                          f"PO number {_d(rng, 10)}"]),
        "invoice": rng.choice([f"INV-{y}-{_d(rng, 5)}", f"invoice {_d(rng, 8)}"]),
        "ticket": rng.choice([f"JIRA-{_d(rng, 4)}", f"INC-{y}-{_d(rng, 5)}",
                              f"ticket #{_d(rng, 6)}", f"case {_d(rng, 8)}"]),
        "build": rng.choice([f"build {y}{mo:02d}{d:02d}.{rng.randint(1, 9)}",
                             f"build #{_d(rng, 5)}", f"build {_d(rng, 10)}"]),
        "version": rng.choice([f"v{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 99)}",
                               f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
                               f"-rc{rng.randint(1, 5)}", f"release {y}.{mo:02d}"]),
        "sku": f"{rng.choice(['AB', 'XK', 'SKU'])}-{_d(rng, 4)}-{rng.choice(['XL', 'M', 'BLK'])}",
        "port": rng.choice([f"port {rng.randint(1024, 65535)}",
                            f"localhost:{rng.randint(1024, 65535)}"]),
        "duration": rng.choice([f"{rng.randint(1, 99999)} ms", f"{rng.randint(1, 9)}h "
                                f"{rng.randint(1, 59)}m", f"PT{rng.randint(1, 90)}M",
                                f"{rng.randint(1, 600)}s"]),
        "amount": rng.choice([f"${rng.randint(1, 999)},{_d(rng, 3)}.{_d(rng, 2)}",
                              f"EUR {rng.randint(1, 999)}.{_d(rng, 3)},{_d(rng, 2)}",
                              f"R$ {rng.randint(1, 99)}.{_d(rng, 3)},{_d(rng, 2)}",
                              f"₹{rng.randint(1, 9)},{_d(rng, 2)},{_d(rng, 3)}",
                              f"{rng.randint(1, 999999)} USD"]),
        "commit": "".join(rng.choice("0123456789abcdef") for _ in range(rng.choice([7, 40]))),
        "uuid": "-".join("".join(rng.choice("0123456789abcdef") for _ in range(n))
                         for n in (8, 4, 4, 4, 12)),
    }
    return out[kind]


KINDS = ("date", "timestamp", "other date", "unix time", "order", "po", "invoice", "ticket",
         "build", "version", "sku", "port", "duration", "amount", "commit", "uuid")
TEMPLATES = (
    "Timeline:\n- {a} first alert fired\n- {b} rollback started\n- {c} resolved",
    "Ticket {a}: customer reported the export failing since {b}; see {c}.",
    "## Changelog\n* {a}: fixed the retry loop\n* {b}: bumped the client ({c})",
    "service:\n  listen: {a}\n  timeout: {b}\n  owner_ref: {c}\n",
    "| field | value |\n|---|---|\n| opened | {a} |\n| ref | {b} |\n| total | {c} |",
    '{{"event": "payment", "at": "{a}", "ref": "{b}", "amount": "{c}"}}',
    "[09:14] bot: deploy {a} finished at {b}, took {c}",
)


@SLOW
@given(st.sampled_from(KINDS), st.sampled_from(KINDS), st.sampled_from(KINDS),
       st.sampled_from(TEMPLATES), st.integers(0, 2**32))
def test_business_tokens_are_never_masked(redactor: Redactor, ka: str, kb: str, kc: str,
                                          template: str, seed: int) -> None:
    rng = random.Random(seed)
    text = template.format(a=token(ka, rng), b=token(kb, rng), c=token(kc, rng))
    (out,) = redactor.redact_texts([text])
    assert out.text == text, (text, out.text)


def test_the_false_positives_of_the_issue_stay(redactor: Redactor) -> None:
    texts = [
        "Order ORD-2026-595105 shipped on 2026-02-25.",
        "Ticket PO 4188185869: customer reported the export failing since 2026-02-25.",
        "Released build 20261210.3; PO number 4500123456 approved.",
        "Timestamp 1735689600 and 2026-02-25T09:14:00.123+05:30.",
        "The Orion ingestion cluster restarted; the Atlas gateway timed out on port 8443.",
        "Invoice INV-2026-00042 for $1,234.56 paid on 25.02.2026 after 3h 25m.",
        "# Deploy notes\n2026-02-25 09:14 UTC deploy v2.4.1 started\n"
        "2026-02-25 09:20 UTC build 4512 rolled back",
        # records whose last field is a date or a time, the next record's number after it
        "id,opened,ticket\n1,2026-09-24\n2,2026-12-01,4188185869\n3,2026-12-02,",
        "id;at;retries\n1;09:14:00\n2;09:20:00;3\n3;10:00:00;4",
        "| id | updated_at |\n|---|---|\n| 2 | 2026-12-11 |\n| 3 | 2026-01-14 |",
    ]
    for text, out in zip(texts, redactor.redact_texts(texts), strict=True):
        assert out.text == text, out.text
