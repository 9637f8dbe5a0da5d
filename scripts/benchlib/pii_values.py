"""The values planted by scripts/benchlib/pii_planted.py, one locale at a time: person names
in Latin letters and in the locale's own script (Faker), e-mail addresses, phone numbers that
`phonenumbers` calls valid for the locale's regions, cards, IBANs, national ids
(scripts/benchlib/pii_ids.py) and secrets of the published shapes.

Each value knows which of its characters identify someone (`Value.ident`): the digits of a
number but not a phone's country code or trunk prefix, the local part and the registrable
domain label of an e-mail but not the "@", the dots or the public suffix, the letters of a
name but not "da" or "von", the random body of a key but not its published prefix. That is
what the leak rule looks for in the redacted text (scripts/benchlib/pii_scoring.py).
"""

from __future__ import annotations

import base64
import json
import random
import string
import unicodedata
from dataclasses import dataclass

import phonenumbers
from faker import Faker
from faker.decode import unidecode

from scripts.benchlib import pii_ids


@dataclass(frozen=True)
class Value:
    type: str
    text: str
    ident: tuple[bool, ...]  # per character of text: does it identify?
    kind: str = ""  # the type's sub-kind: secret kind, card brand, phone region ...


@dataclass(frozen=True)
class LocaleSpec:
    code: str
    faker: str  # Faker locale of the names in the locale's own script
    latin: str  # Latin names: "native" (own script is Latin), "romanized", "ascii", a Faker locale
    regions: tuple[str, ...]  # phone regions
    cards: tuple[str, ...]
    ibans: tuple[str, ...]
    ids: tuple[str, ...]

    @property
    def own_script(self) -> bool:
        return self.latin != "native"


LOCALES = {s.code: s for s in (
    LocaleSpec("en", "en_US", "native", ("US", "GB"), ("visa", "mastercard", "amex", "discover"),
               ("GB",), ("us_ssn",)),
    LocaleSpec("de", "de_DE", "native", ("DE",), ("visa", "mastercard", "maestro"), ("DE",),
               ("de_tax_id",)),
    LocaleSpec("pt-BR", "pt_BR", "native", ("BR",), ("visa", "mastercard", "elo"), ("BR",),
               ("br_cpf", "br_cnpj")),
    LocaleSpec("es", "es_ES", "native", ("ES",), ("visa", "mastercard"), ("ES",), ()),
    LocaleSpec("fr", "fr_FR", "native", ("FR",), ("visa", "mastercard"), ("FR",), ()),
    LocaleSpec("hi-IN", "hi_IN", "en_IN", ("IN",), ("visa", "mastercard", "rupay"), (),
               ("in_aadhaar",)),
    # Faker has no Arabic names in Latin letters: en_PK's are mostly Arabic-origin names.
    LocaleSpec("ar", "ar_AA", "en_PK", ("SA", "AE", "EG"), ("visa", "mastercard"),
               ("SA", "AE", "EG"), ()),
    LocaleSpec("zh-CN", "zh_CN", "romanized", ("CN",), ("unionpay", "visa"), (),
               ("cn_resident_id",)),
    LocaleSpec("ja", "ja_JP", "romanized", ("JP",), ("jcb", "visa", "mastercard"), (), ()),
    LocaleSpec("ko", "ko_KR", "ascii", ("KR",), ("visa", "mastercard"), (), ("kr_rrn",)),
    LocaleSpec("ru", "ru_RU", "ascii", ("RU",), ("mir", "visa", "mastercard"), (),
               ("ru_passport",)),
)}

PARTICLES = {"da", "de", "do", "dos", "das", "del", "della", "di", "du", "la", "le", "van",
             "von", "der", "den", "ter", "y", "e", "bin", "ibn", "al"}
# How Korean surnames are written in Latin letters by their bearers (not Revised Romanization).
KO_SURNAMES = {"김": "Kim", "이": "Lee", "박": "Park", "최": "Choi", "정": "Jung", "강": "Kang",
               "조": "Cho", "윤": "Yoon", "장": "Jang", "임": "Lim", "한": "Han", "오": "Oh",
               "신": "Shin", "서": "Seo", "권": "Kwon", "황": "Hwang", "송": "Song", "류": "Ryu"}


def _letters(text: str) -> tuple[bool, ...]:
    """Every letter identifies, except the lower-case particles of a surname."""
    mask = [unicodedata.category(c)[0] in "LM" for c in text]
    at = 0
    for word in text.split(" "):
        if word in PARTICLES:
            mask[at:at + len(word)] = [False] * len(word)
        at += len(word) + 1
    return tuple(mask)


class People:
    """Names of one locale, from seeded Faker instances."""

    def __init__(self, spec: LocaleSpec, seed: int) -> None:
        self.spec = spec
        self.own = Faker(spec.faker)
        self.own.seed_instance(seed)
        latin = spec.latin if spec.latin not in ("native", "romanized", "ascii") else spec.faker
        self.latin_fake = Faker(latin)
        self.latin_fake.seed_instance(seed + 1)

    def own_script(self, rng: random.Random, given_only: bool = False) -> Value:
        f, code = self.own, self.spec.code
        sex = _sex(rng)
        given, family = _part(f, "first_name", sex), _part(f, "last_name", sex)
        if given_only:
            text = given
        elif code in ("zh-CN", "ko") or (code == "ja" and rng.random() < 0.5):
            text = family + given
        elif code == "ja" or (code == "ru" and rng.random() < 0.3):
            patronymic = f" {_part(f, 'middle_name', sex)}" if code == "ru" else ""
            text = f"{family} {given}{patronymic}"
        else:
            text = f"{given} {family}"
        return Value("person_own", text, _letters(text), code)

    def latin(self, rng: random.Random, given_only: bool = False) -> Value:
        given, family = self.latin_parts(rng)
        text = given if given_only else f"{given} {family}"
        if not given_only and self.spec.code in ("zh-CN", "ko") and rng.random() < 0.5:
            text = f"{family} {given}"
        return Value("person", text, _letters(text), self.spec.code)

    def latin_parts(self, rng: random.Random) -> tuple[str, str]:
        how, f, sex = self.spec.latin, self.latin_fake, _sex(rng)
        if how == "romanized":
            return f.first_romanized_name(), f.last_romanized_name()
        if how == "ascii":
            family = _part(f, "last_name", sex)
            return _ascii(_part(f, "first_name", sex)), KO_SURNAMES.get(family) or _ascii(family)
        return _part(f, "first_name", sex), _part(f, "last_name", sex)


def _sex(rng: random.Random) -> str:
    return "male" if rng.random() < 0.5 else "female"


def _part(fake: Faker, part: str, sex: str) -> str:
    """A name part of one sex where the locale has them (Russian surnames, patronymics)."""
    method = getattr(fake, f"{part}_{sex}", None) or getattr(fake, part)
    return str(method())


def _ascii(name: str) -> str:
    return unidecode(name).replace("'", "").strip().title()


def email(people: People, rng: random.Random) -> Value:
    given, family = (unidecode(p).lower() for p in people.latin_parts(rng))
    given, family = ("".join(c for c in p if c.isalnum()) for p in (given, family))
    local = rng.choice([f"{given}.{family}", f"{given[0]}.{family}", f"{given}{family}",
                        f"{given}_{family}{rng.randint(1, 99)}", f"{family}.{given}"])
    fake = people.latin_fake if people.spec.latin != "romanized" else people.own
    domain = fake.free_email_domain() if rng.random() < 0.5 else fake.domain_name()
    text = f"{local}@{domain}"
    labels = domain.split(".")
    suffix = 2 if ".".join(labels[-2:]) in MULTI_SUFFIXES else 1
    mask = [c.isalnum() for c in local] + [False]
    for k, label in enumerate(labels):
        mask += [c.isalnum() and k < len(labels) - suffix for c in label] + [False]
    return Value("email", text, tuple(mask[:len(text)]), people.spec.code)


MULTI_SUFFIXES = {"com.br", "co.jp", "ne.jp", "or.jp", "co.kr", "com.cn", "co.uk", "co.in",
                  "com.sa", "co.ae", "com.eg", "com.mx", "com.es", "com.ru", "com.ar"}
PHONE_FORMATS = ((phonenumbers.PhoneNumberFormat.INTERNATIONAL, 0.5),
                 (phonenumbers.PhoneNumberFormat.NATIONAL, 0.35),
                 (phonenumbers.PhoneNumberFormat.E164, 0.15))


def phone(region: str, rng: random.Random) -> Value:
    """A number `phonenumbers` calls valid (mobile or fixed line) for `region`, formatted as
    people write it; its national significant number identifies, the country code and the
    trunk prefix do not."""
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    assert meta is not None, region
    desc = meta.mobile if rng.random() < 0.6 else meta.fixed_line
    assert desc is not None and desc.example_number is not None, region
    example: str = desc.example_number
    number = phonenumbers.parse(example, region)
    for _ in range(1000):
        keep = rng.randint(1, 3)
        candidate = phonenumbers.parse(example[:keep] + pii_ids.digits(rng, len(example) - keep),
                                       region)
        if phonenumbers.is_valid_number_for_region(candidate, region):
            number = candidate
            break
    fmt = rng.choices([f for f, _ in PHONE_FORMATS], [w for _, w in PHONE_FORMATS])[0]
    text = phonenumbers.format_number(number, fmt)
    nsn = phonenumbers.national_significant_number(number)
    where = [i for i, c in enumerate(text) if c.isdigit()]
    assert "".join(text[i] for i in where).endswith(nsn), text
    ident = set(where[len(where) - len(nsn):])
    return Value("phone", text, tuple(i in ident for i in range(len(text))), region)


def numbered(type_: str, text: str, kind: str = "") -> Value:
    """An id whose every letter and digit identifies, but an IBAN's country code."""
    mask = [c.isalnum() for c in text]
    if type_ == "iban":
        mask[:2] = [False, False]
    return Value(type_, text, tuple(mask), kind)


def card(spec: LocaleSpec, rng: random.Random) -> Value:
    brand = rng.choice(spec.cards)
    return numbered("card", pii_ids.card(rng, brand), brand)


def iban(spec: LocaleSpec, rng: random.Random) -> Value:
    country = rng.choice(spec.ibans)
    return numbered("iban", pii_ids.iban(rng, country), country)


def national(type_: str, rng: random.Random) -> Value:
    return numbered(type_, pii_ids.NATIONAL[type_](rng))


ALNUM = string.ascii_letters + string.digits
SECRET_KINDS = ("google_api_key", "gitlab_pat", "github_pat", "github_fine_grained",
                "slack_token", "stripe_live", "aws_access_key", "aws_secret", "pem_key", "jwt")


def _rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _pem(rng: random.Random) -> tuple[str, str, str]:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY",
                        "OPENSSH PRIVATE KEY"])
    body = base64.b64encode(b"\x30\x82\x04\xa4" + rng.randbytes(rng.randint(180, 300))).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n", lines, f"\n-----END {label}-----"


def _jwt_body(rng: random.Random) -> str:
    claims = {"sub": pii_ids.digits(rng, 10), "iat": rng.randint(1_700_000_000, 1_800_000_000)}
    return _b64url(json.dumps(claims).encode()) + "." + _b64url(rng.randbytes(32))


def secret(kind: str, rng: random.Random) -> Value:
    """A key or token of `kind`: (prefix, body, suffix), only the body identifying."""
    urlsafe = ALNUM + "_-"
    parts = {
        "google_api_key": lambda: ("AIza", _rand(rng, 35, urlsafe), ""),
        "gitlab_pat": lambda: ("glpat-", _rand(rng, 20, urlsafe), ""),
        "github_pat": lambda: ("ghp_", _rand(rng, 36), ""),
        "github_fine_grained": lambda: ("github_pat_", f"{_rand(rng, 22)}_{_rand(rng, 59)}", ""),
        "slack_token": lambda: (rng.choice(["xoxb-", "xoxp-"]), f"{pii_ids.digits(rng, 12)}-"
                                f"{pii_ids.digits(rng, 13)}-{_rand(rng, 24)}", ""),
        "stripe_live": lambda: ("sk_live_", _rand(rng, rng.choice([24, 99])), ""),
        "aws_access_key": lambda: ("AKIA", _rand(rng, 16, string.ascii_uppercase + "234567"), ""),
        "aws_secret": lambda: ("aws_secret_access_key = ", _rand(rng, 40, ALNUM + "/+"), ""),
        "pem_key": lambda: _pem(rng),
        "jwt": lambda: (_b64url(b'{"alg":"HS256","typ":"JWT"}') + ".", _jwt_body(rng), ""),
    }[kind]()
    prefix, body, suffix = parts
    ident = [False] * len(prefix) + [c not in ".\n" for c in body] + [False] * len(suffix)
    return Value("secret", prefix + body + suffix, tuple(ident), kind)
