"""Valid personal numbers of the served locales and the ways people and systems write them,
made here for the property tests (no Faker list, no bench seed): each generator builds a
number that passes its own check, and each form renders it as a reader still reads it."""

from __future__ import annotations

import random

from shared.text.checksums import luhn_ok

# Number words of the served locales, 0-9 (English, German, Portuguese, Russian, Hindi,
# Arabic), and the East Asian digit characters.
WORDS = {
    "en": str.split("zero one two three four five six seven eight nine"),
    "de": str.split("null eins zwei drei vier fünf sechs sieben acht neun"),
    "pt": str.split("zero um dois três quatro cinco seis sete oito nove"),
    "ru": str.split("ноль один два три четыре пять шесть семь восемь девять"),
    "hi": str.split("शून्य एक दो तीन चार पांच छह सात आठ नौ"),
    "ar": str.split("صفر واحد اثنان ثلاثة أربعة خمسة ستة سبعة ثمانية تسعة"),
}
CJK = "〇一二三四五六七八九"
HANGUL = "공일이삼사오육칠팔구"
# Decimal digit scripts a reader reads as 0-9: fullwidth, Arabic-Indic, extended
# Arabic-Indic, Devanagari, Bengali, Thai, mathematical bold.
DIGIT_BASES = (0xFF10, 0x0660, 0x06F0, 0x0966, 0x09E6, 0x0E50, 0x1D7CE)
SEPARATORS = (" ", "-", ".", "·", "\u00a0", "\u2009", "\u202f", " - ", "\n", "・", "•")


def card(rng: random.Random) -> str:
    """A Visa or Mastercard number (16 digits) that passes Luhn."""
    head = rng.choice(["4", "51", "52", "53", "54", "55", "2221", "2720"])
    body = head + "".join(rng.choice("0123456789") for _ in range(15 - len(head)))
    return body + next(d for d in "0123456789" if luhn_ok(body + d))


def cpf(rng: random.Random) -> str:
    d = [rng.randrange(10) for _ in range(9)]
    if len(set(d)) == 1:
        d[0] = (d[0] + 1) % 10
    return cpf_of("".join(map(str, d)))


def cpf_of(body: str) -> str:
    """The CPF whose first nine digits are `body` (its two check digits appended)."""
    d = [int(c) for c in body]
    for n in (9, 10):
        d.append(sum(d[i] * (n + 1 - i) for i in range(n)) * 10 % 11 % 10)
    return "".join(map(str, d))


def cnpj(rng: random.Random) -> str:
    return cnpj_of("".join(str(rng.randrange(10)) for _ in range(8)) + "0001")


def cnpj_of(body: str) -> str:
    """The CNPJ whose first twelve digits are `body`."""
    d = [int(c) for c in body]
    for n in (12, 13):
        weights = [(n - 1 - i) % 8 + 2 for i in range(n)]
        r = sum(x * w for x, w in zip(d, weights, strict=True)) % 11
        d.append(0 if r < 2 else 11 - r)
    return "".join(map(str, d))


def aadhaar(rng: random.Random) -> str:
    from shared.text.checksums import verhoeff_ok
    body = str(rng.randint(2, 9)) + "".join(rng.choice("0123456789") for _ in range(10))
    return body + next(c for c in "0123456789" if verhoeff_ok(body + c))


def prc_resident_id(rng: random.Random) -> str:
    region = rng.choice(["110105", "310104", "440305", "510107", "330106"])
    birth = f"{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    body = region + birth + f"{rng.randint(0, 999):03d}"
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return body + "10X98765432"[sum(int(c) * w for c, w in zip(body, weights,
                                                               strict=True)) % 11]


def korean_rrn(rng: random.Random) -> str:
    year = rng.randint(1950, 2019)
    body = (f"{year % 100:02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
            f"{rng.choice('12') if year < 2000 else rng.choice('34')}"
            + "".join(rng.choice("0123456789") for _ in range(5)))
    weights = (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)
    return body + str((11 - sum(int(c) * w for c, w in zip(body, weights,
                                                           strict=True)) % 11) % 10)


def steuer_id(rng: random.Random) -> str:
    while True:
        digits = rng.sample("0123456789", 9)
        if digits[0] == "0":
            continue
        digits.insert(rng.randrange(1, 10), rng.choice(digits))
        product = 10
        for ch in digits:
            total = (int(ch) + product) % 10 or 10
            product = total * 2 % 11
        return "".join(digits) + str((11 - product) % 10)


def ru_passport(rng: random.Random) -> str:
    return f"{rng.randint(1, 99):02d}{rng.randint(0, 25):02d}{rng.randint(100000, 999999)}"


# How each kind is printed (group sizes) and the label that names it.
GROUPS = {"BR_CPF": (3, 3, 3, 2), "BR_CNPJ": (2, 3, 3, 4, 2), "IN_AADHAAR": (4, 4, 4),
          "CN_RESIDENT_ID": (18,), "KR_RRN": (6, 7), "DE_TAX_ID": (2, 3, 3, 3),
          "RU_PASSPORT": (2, 2, 6), "CREDIT_CARD": (4, 4, 4, 4)}
PRINTED_SEPARATORS = {"BR_CPF": (".", ".", "-"), "BR_CNPJ": (".", ".", "/", "-"),
                      "KR_RRN": ("-",)}
LABELS = {"BR_CPF": "CPF", "BR_CNPJ": "CNPJ", "IN_AADHAAR": "Aadhaar",
          "CN_RESIDENT_ID": "身份证号", "KR_RRN": "주민등록번호", "DE_TAX_ID": "Steuer-ID",
          "RU_PASSPORT": "Паспорт", "CREDIT_CARD": "card"}
MAKERS = {"BR_CPF": cpf, "BR_CNPJ": cnpj, "IN_AADHAAR": aadhaar,
          "CN_RESIDENT_ID": prc_resident_id, "KR_RRN": korean_rrn, "DE_TAX_ID": steuer_id,
          "RU_PASSPORT": ru_passport, "CREDIT_CARD": card}


def grouped(digits: str, sizes: tuple[int, ...], seps: tuple[str, ...]) -> list[str]:
    """`digits` cut into groups of `sizes` (the last takes the rest)."""
    out, pos = [], 0
    for size in sizes:
        out.append(digits[pos:pos + size])
        pos += size
    if pos < len(digits):
        out[-1] += digits[pos:]
    return [g for g in out if g]


def printed(kind: str, digits: str) -> str:
    """The number as its own documents print it."""
    groups = grouped(digits, GROUPS[kind], ())
    seps = PRINTED_SEPARATORS.get(kind, (" ",) * (len(groups) - 1))
    return groups[0] + "".join(s + g for s, g in zip(seps, groups[1:], strict=True))


def in_script(digits: str, base: int) -> str:
    return "".join(chr(base + int(c)) if c.isdigit() else c for c in digits)


def spelled(digits: str, lang: str, rng: random.Random, mixed: bool = False) -> str:
    """Each digit as a word of `lang` (some kept as digits when `mixed`), in groups of
    three or four separated by commas."""
    words = []
    for i, c in enumerate(digits):
        if i and i % rng.choice([3, 4]) == 0 and rng.random() < 0.5:
            words[-1] += ","
        words.append(c if (mixed and rng.random() < 0.3) or not c.isdigit()
                     else WORDS[lang][int(c)])
    return " ".join(words)


def east_asian(digits: str, table: str) -> str:
    """`digits` in Chinese/Japanese numerals (CJK) or Sino-Korean syllables (HANGUL)."""
    return "".join(table[int(c)] if c.isdigit() else c for c in digits)
