"""Known PII of every supported type, and a labelled corpus of templated sentences.

Shared by the redaction unit tests, the planted-PII scan over the real mesh and
scripts/bench_redaction (per-entity precision, recall and F2). Values are synthetic:
test card numbers, documentation IP ranges, fictional phone exchanges, example keys.
"""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

PRIVATE_KEY = ("-----BEGIN RSA PRIVATE KEY-----\n"
               "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFc"
               "zGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW\n-----END RSA PRIVATE KEY-----")

# entity -> values; for SECRET the value is the secret itself (what must never leak).
VALUES: dict[str, tuple[str, ...]] = {
    "PERSON": ("Jennifer Lawrence", "Robert Miller", "Maria Garcia", "Thomas Becker",
               "Emily Johnson", "Michael Brown", "Sarah Thompson", "Daniel Fischer",
               "Walentina Faust", "Ruthild Reuter"),
    "EMAIL_ADDRESS": ("jennifer.lawrence@example.com", "r.miller@contoso.org",
                      "maria_garcia77@mail.example.net", "t.becker@firma.example.de"),
    "PHONE_NUMBER": ("+1 415-555-0199", "(212) 555-0142", "+44 20 7946 0958",
                     "+49 30 901820", "+33 1 42 68 53 00", "+91 98765 43210",
                     "(555) 234-5678", "+1 999 234 5678"),
    "CREDIT_CARD": ("4111 1111 1111 1111", "5500-0000-0000-0004", "4012888888881881",
                    "3400 0000 0000 009", "2223003122003222", "6200.0000.0000.0005"),
    "IBAN_CODE": ("DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32",
                  "FR1420041010050500013M02606", "NL91ABNA0417164300"),
    "US_SSN": ("536-22-1098", "412-68-3391", "287-45-9012"),
    "IP_ADDRESS": ("10.0.4.17", "192.168.13.250", "203.0.113.42", "2001:db8::8a2e:370:7334"),
    "LOCATION": ("Berlin", "Chicago", "Lisbon", "Toronto", "Nairobi", "Melbourne"),
    "CRYPTO": ("1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
               "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"),
    "SECRET": ("sk_live_4eC39HqLyjWDarjtT1zdp7dcQx", "AKIAIOSFODNN7EXAMPLE",
               "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", "password=Tr0ub4dor&3x",
               "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
               PRIVATE_KEY),
}

TEMPLATES: dict[str, tuple[str, ...]] = {
    "PERSON": ("Escalation from {v} about the refund backlog.",
               "The incident was reported by {v} on Monday morning.",
               "Please ask {v} to review the rollback plan."),
    "EMAIL_ADDRESS": ("Send the postmortem to {v} before Friday.",
                      "The customer wrote from {v} twice this week."),
    "PHONE_NUMBER": ("Call the on-call engineer at {v} if the queue backs up.",
                     "Customer callback number: {v}."),
    "CREDIT_CARD": ("The payment with card {v} was declined twice.",
                    "Refund issued to credit card {v} after the outage."),
    "IBAN_CODE": ("Wire the settlement to IBAN {v} by end of month.",
                  "Supplier bank account {v} was updated in the ledger."),
    "US_SSN": ("Employee SSN {v} appeared in the export by mistake.",
               "Verify the social security number {v} against the HR record."),
    "IP_ADDRESS": ("Traffic from {v} triggered the rate limiter.",
                   "The replica at {v} lagged behind the primary."),
    "LOCATION": ("The data center in {v} lost power for ten minutes.",
                 "Our support team in {v} handled the escalation."),
    "CRYPTO": ("The ransom note asked for payment to wallet {v}.",
               "Withdrawals to bitcoin address {v} were blocked."),
    "SECRET": ("The deploy log printed {v} in plain text.",
               "Rotate the credential: {v} was pasted into the ticket."),
}

FILLER = (
    "The checkout service returned HTTP 502 for card payments for about twenty minutes.",
    "The on-call engineer rotated the expired TLS certificate on the payment gateway.",
    "Disk usage on the build agents crossed the alert threshold during the nightly run.",
    "We rolled back release 4.12.3 after error rates doubled in the canary on Tuesday.",
    "The search index was rebuilt and query latency returned to normal by 14:05 UTC.",
    "Follow-up actions include better Grafana dashboards and a runbook for the Redis tier.",
    "Ticket #48213 tracks the Kafka consumer lag seen on port 8443 since build 20261128.",
    "Order 7741-2209 shipped twice because the Stripe webhook retried after a timeout.",
)

FIRST = ("Jennifer", "Robert", "Maria", "Thomas", "Emily", "Michael", "Sarah", "Daniel",
         "Aisha", "Kenji", "Olga", "Carlos", "Fatima", "Liam", "Chloe", "Rajesh")
LAST = ("Lawrence", "Miller", "Garcia", "Becker", "Johnson", "Brown", "Thompson", "Fischer",
        "Okafor", "Tanaka", "Petrova", "Silva", "Haddad", "Walsh", "Dubois", "Sharma")
PLACES = ("Berlin", "Chicago", "Lisbon", "Toronto", "Nairobi", "Melbourne", "Madrid",
          "Seattle", "Munich", "Dublin", "Mumbai", "Boston", "Vienna", "Denver", "Oslo")
DOMAINS = ("example.com", "contoso.org", "mail.example.net", "firma.example.de")
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def luhn_check_digit(body: str) -> str:
    """The digit that makes `body` + it pass the Luhn check."""
    total = 0
    for i, d in enumerate(reversed(body)):
        n = int(d) * (2 if i % 2 == 0 else 1)
        total += n - 9 if n > 9 else n
    return str((10 - total % 10) % 10)


def luhn_number(prefix: str, length: int, rng: random.Random) -> str:
    """A Luhn-valid number of `length` digits starting with `prefix`."""
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    return body + luhn_check_digit(body)


def _iban_de(rng: random.Random) -> str:
    bban = "".join(rng.choice(string.digits) for _ in range(18))
    check = 98 - int(bban + "131400") % 97  # "DE00" as digits: D=13, E=14
    raw = f"DE{check:02d}{bban}"
    return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4))


def _btc(rng: random.Random) -> str:
    payload = bytes([0]) + rng.randbytes(20)
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    n, out = int.from_bytes(data, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" + out  # one leading zero byte


def _alnum(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits,
           ) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _card(rng: random.Random) -> str:
    digits = luhn_number(rng.choice(["4", "51", "55"]), 16, rng)
    sep = rng.choice([" ", "-", ""])
    return sep.join(digits[i:i + 4] for i in range(0, 16, 4))


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "PERSON": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "EMAIL_ADDRESS": lambda r: f"{r.choice(FIRST)}.{r.choice(LAST)}{r.randint(1, 99)}@"
                               f"{r.choice(DOMAINS)}".lower(),
    "PHONE_NUMBER": lambda r: r.choice([
        f"+1 {r.choice(['415', '212', '646', '312', '617'])}-555-01{r.randint(10, 99)}",
        f"({r.choice(['206', '303', '512'])}) 555-01{r.randint(10, 99)}",
        f"+44 20 7946 0{r.randint(100, 999)}", f"+49 30 {r.randint(200000, 999999)}",
        f"+33 1 {r.randint(40, 49)} {r.randint(10, 99)} {r.randint(10, 99)} {r.randint(10, 99)}",
        f"+91 98{r.randint(100, 999)} {r.randint(10000, 99999)}"]),
    "CREDIT_CARD": _card,
    "IBAN_CODE": _iban_de,
    "US_SSN": lambda r: f"{r.randint(100, 665)}-{r.randint(10, 99)}-{r.randint(1000, 9999)}",
    "IP_ADDRESS": lambda r: r.choice([
        f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}",
        f"203.0.113.{r.randint(1, 254)}",
        f"2001:db8::{r.randint(1, 0xffff):x}:{r.randint(1, 0xffff):x}"]),
    "LOCATION": lambda r: r.choice(PLACES),
    "CRYPTO": _btc,
    "SECRET": lambda r: r.choice([
        f"sk_live_{_alnum(r, 24)}", f"AKIA{_alnum(r, 16, string.ascii_uppercase + string.digits)}",
        f"ghp_{_alnum(r, 36)}", f"password={_alnum(r, 12)}!", f"Bearer {_alnum(r, 40)}",
        f"token: {_alnum(r, 20)}"]),
}


@dataclass(frozen=True)
class Span:
    entity: str
    start: int
    end: int


@dataclass(frozen=True)
class Labelled:
    text: str
    spans: tuple[Span, ...]


def labelled_texts(n: int, target_chars: int, seed: int = 7, pii_per_text: int = 4,
                   ) -> list[Labelled]:
    """n texts of about target_chars, each with pii_per_text generated PII sentences."""
    rng = random.Random(seed)
    entities = sorted(VALUES)
    out = []
    for i in range(n):
        parts: list[str] = []
        spans: list[Span] = []
        pos, k = 0, 0
        while pos < target_chars:
            if k < pii_per_text and rng.random() < 0.5:
                entity = entities[(i * pii_per_text + k) % len(entities)]
                value = GENERATORS[entity](rng)
                template = rng.choice(TEMPLATES[entity])
                start = pos + template.index("{v}")
                spans.append(Span(entity, start, start + len(value)))
                sentence, k = template.replace("{v}", value), k + 1
            else:
                sentence = rng.choice(FILLER)
            parts.append(sentence)
            pos += len(sentence) + 1
        out.append(Labelled(" ".join(parts), tuple(spans)))
    return out
