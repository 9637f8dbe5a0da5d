"""Identifiers with their real check digits: cards (Luhn), IBANs (ISO 13616 mod 97, with the
national check digits of FR and ES), Brazil's CPF and CNPJ, India's Aadhaar (Verhoeff), the
PRC resident id (ISO 7064 MOD 11-2), Korea's RRN, Germany's Steuer-ID (ISO 7064 MOD 11,10),
Russia's internal passport and the US SSN (no check digit: their issuing rules instead).

Each function takes a random.Random and returns the identifier as people write it; the
format (separators, grouping) is drawn too. Written from the published schemes, not from
the detection's code, so a shared mistake cannot hide a miss.
"""

from __future__ import annotations

import random
import string

from scripts.benchlib.pii_corpus import luhn_check_digit

D = string.digits

# Issuer prefixes and lengths per brand (the networks' published ranges).
CARD_BRANDS: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "visa": (("4",), (16,)),
    "mastercard": (("51", "52", "53", "54", "55", "2221", "2500", "2720"), (16,)),
    "amex": (("34", "37"), (15,)),
    "discover": (("6011", "644", "65"), (16,)),
    "jcb": (("3528", "3540", "3566", "3589"), (16,)),
    "unionpay": (("62",), (16, 19)),
    "rupay": (("60", "652", "81", "82", "508"), (16,)),
    "mir": (("2200", "2201", "2202", "2203", "2204"), (16,)),
    "elo": (("636368", "438935", "504175", "451416", "636297", "5067", "4576"), (16,)),
    "maestro": (("5018", "5020", "5038", "6304", "6759"), (16, 19)),
}


def digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(D) for _ in range(n))


def grouped(raw: str, sizes: list[int], sep: str) -> str:
    out, at = [], 0
    for size in sizes:
        out.append(raw[at:at + size])
        at += size
    if at < len(raw):
        out.append(raw[at:])
    return sep.join(p for p in out if p)


def card(rng: random.Random, brand: str) -> str:
    prefixes, lengths = CARD_BRANDS[brand]
    length = rng.choice(lengths)
    body = rng.choice(prefixes)
    body += digits(rng, length - len(body) - 1)
    raw = body + luhn_check_digit(body)
    sizes = [4, 6, 5] if length == 15 else [4] * 5
    return grouped(raw, sizes, rng.choice([" ", " ", "-", ""]))


def _numeric(s: str) -> int:
    return int("".join(str(int(c, 36)) for c in s))


def iban_from(country: str, bban: str) -> str:
    check = 98 - _numeric(bban + country + "00") % 97
    return f"{country}{check:02d}{bban}"


def _es_dc(ten: str) -> str:
    d = 11 - sum(int(c) * w for c, w in zip(ten, (1, 2, 4, 8, 5, 10, 9, 7, 3, 6),
                                             strict=True)) % 11
    return str({10: 1, 11: 0}.get(d, d))


def _bban(rng: random.Random, country: str) -> str:
    if country == "DE":
        return digits(rng, 18)
    if country == "GB":
        return rng.choice(["NWBK", "BARC", "HBUK", "LOYD", "MIDL"]) + digits(rng, 14)
    if country == "FR":
        bank, branch, account = digits(rng, 5), digits(rng, 5), digits(rng, 11)
        key = 97 - (89 * int(bank) + 15 * int(branch) + 3 * int(account)) % 97
        return f"{bank}{branch}{account}{key:02d}"
    if country == "ES":
        bank, account = digits(rng, 8), digits(rng, 10)
        return bank + _es_dc("00" + bank) + _es_dc(account) + account
    if country == "BR":
        return digits(rng, 23) + rng.choice("CP") + rng.choice("123456789")
    lengths = {"SA": 20, "AE": 19, "EG": 25}
    return digits(rng, lengths[country])


def iban(rng: random.Random, country: str) -> str:
    raw = iban_from(country, _bban(rng, country))
    return grouped(raw, [4] * 9, " ") if rng.random() < 0.6 else raw


def _mod11_weights(body: str, weights: list[int]) -> int:
    return sum(int(c) * w for c, w in zip(body, weights, strict=True)) % 11


def cpf(rng: random.Random) -> str:
    body = digits(rng, 9)
    while len(set(body)) == 1:
        body = digits(rng, 9)
    for n in (10, 11):
        body += str(_mod11_weights(body, list(range(n, 1, -1))) * 10 % 11 % 10)
    return f"{body[:3]}.{body[3:6]}.{body[6:9]}-{body[9:]}" if rng.random() < 0.7 else body


def cnpj(rng: random.Random) -> str:
    body = digits(rng, 8) + rng.choice(["0001", "0001", "0002"])
    for weights in ([5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2], [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]):
        r = _mod11_weights(body, weights)
        body += "0" if r < 2 else str(11 - r)
    if rng.random() < 0.7:
        return f"{body[:2]}.{body[2:5]}.{body[5:8]}/{body[8:12]}-{body[12:]}"
    return body


# Verhoeff's tables: multiplication in the dihedral group D5, the position permutations.
_VD = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
       [2, 3, 4, 0, 1, 7, 8, 9, 5, 6], [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
       [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
       [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
       [8, 7, 6, 5, 9, 3, 2, 1, 0, 4], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]]
_VP = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4]]
for _k in range(2, 8):
    _VP.append([_VP[1][_VP[_k - 1][j]] for j in range(10)])
_VINV = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9]


def verhoeff_check_digit(body: str) -> str:
    c = 0
    for i, ch in enumerate(reversed(body)):
        c = _VD[c][_VP[(i + 1) % 8][int(ch)]]
    return str(_VINV[c])


def aadhaar(rng: random.Random) -> str:
    body = rng.choice("23456789") + digits(rng, 10)
    raw = body + verhoeff_check_digit(body)
    return grouped(raw, [4, 4, 4], rng.choice([" ", " ", "-", ""]))


# County-level division codes (GB/T 2260): Beijing Dongcheng, Shanghai Xuhui, Shenzhen
# Nanshan, Chengdu Wuhou, Hangzhou Xihu, Wuhan Wuchang, Nanjing Xuanwu, Xi'an Yanta.
PRC_REGIONS = ("110101", "310104", "440305", "510107", "330106", "420106", "320102", "610113")


def _birth(rng: random.Random, first: int, last: int) -> tuple[int, int, int]:
    return rng.randint(first, last), rng.randint(1, 12), rng.randint(1, 28)


def prc_resident_id(rng: random.Random) -> str:
    y, m, d = _birth(rng, 1950, 2006)
    body = f"{rng.choice(PRC_REGIONS)}{y:04d}{m:02d}{d:02d}{digits(rng, 3)}"
    total = sum(int(c) * pow(2, 17 - i, 11) for i, c in enumerate(body))
    return body + "10X98765432"[total % 11]


def kr_rrn(rng: random.Random) -> str:
    y, m, d = _birth(rng, 1950, 2012)
    sex = rng.choice("12" if y < 2000 else "34")
    body = f"{y % 100:02d}{m:02d}{d:02d}{sex}{digits(rng, 5)}"
    check = (11 - _mod11_weights(body, [2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5])) % 10
    return f"{body[:6]}-{body[6:]}{check}"


def iso7064_mod11_10(body: str) -> str:
    product = 10
    for ch in body:
        total = (int(ch) + product) % 10 or 10
        product = total * 2 % 11
    return str((11 - product) % 10)


def de_tax_id(rng: random.Random) -> str:
    # Ten digits, the first not 0, exactly one digit twice and one missing (the rule the
    # Bundeszentralamt published; since 2016 a digit may also occur three times).
    while True:
        chosen = rng.sample(D, 9)
        body = chosen + [rng.choice(chosen)]
        rng.shuffle(body)
        if body[0] != "0":
            break
    raw = "".join(body) + iso7064_mod11_10("".join(body))
    return grouped(raw, [2, 3, 3, 3], " ") if rng.random() < 0.5 else raw


# OKATO region codes that open a passport series (Moscow, St Petersburg, Moscow oblast,
# Sverdlovsk, Novosibirsk, Tatarstan, Krasnodar).
RU_REGIONS = ("45", "40", "46", "65", "50", "92", "03")


def ru_passport(rng: random.Random) -> str:
    series = rng.choice(RU_REGIONS) + f"{rng.choice([*range(97, 100), *range(0, 26)]):02d}"
    number = digits(rng, 6)
    return rng.choice([f"{series[:2]} {series[2:]} {number}", f"{series} {number}",
                       f"{series}{number}", f"{series[:2]} {series[2:]} № {number}"])


def us_ssn(rng: random.Random) -> str:
    area = rng.choice([n for n in range(1, 900) if n != 666])
    raw = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
    return grouped(raw, [3, 2, 4], rng.choice(["-", "-", " ", ""]))


NATIONAL = {"us_ssn": us_ssn, "de_tax_id": de_tax_id, "br_cpf": cpf, "br_cnpj": cnpj,
            "in_aadhaar": aadhaar, "cn_resident_id": prc_resident_id, "kr_rrn": kr_rrn,
            "ru_passport": ru_passport}
