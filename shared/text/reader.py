"""The normalised view: a text as a person reads it, beyond the characters they see.

`normalised_view` is `shared.text.visible.reading_view` (hidden characters, NFKC, every
script's digits, cells and line breaks between digits) followed by what a reader does
with the words and marks around a value:

- in a URL's query string, a `+` is the space it encodes (`?name=Anna+Weber`,
  `?phone=%2811%29+2722`), read before percent-decoding, so an encoded `%2B` stays a plus;
- percent-encoding inside a token is decoded (`anna%40example.com`, `?phone=%2B4930...`),
  and so are JSON's `\\u00b7` escapes;
- Cyrillic and Greek look-alike letters inside a token that otherwise reads as Latin
  (`аnna@exаmple.com` with a Cyrillic а) are read as the Latin letter; a word written
  wholly in Cyrillic or Greek keeps its script;
- digits written as words, alone or mixed with digits (shared.text.spelled);
- an e-mail address with its `@` and dots spelled (`anna [at] example [dot] com`, `anna at
  example dot com`, `anna(at)example.com`) or spaced (`anna . weber @ example . com`);
- letter-spaced text (`j o h n @ e x a m p l e . c o m`, `4 1 1 1 ...`) read as one word
  where it makes an address or a number;
- between digit groups: middle dots or bullets (`2202·4665·2532`, three groups or a long
  group: `0·61` is a decimal in some journals' style) or an escaped line break (`\\n` in JSON)
  as a space, and a dash, dot or slash with spaces around it as the bare mark.

Each step is skipped when a cheap test says the text has nothing it would change, so a
text with none of these costs a few regex searches; every character of the view maps
back to the original characters it was read from (`View.span`), so a finding on the view
masks its whole original span.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import phonenumbers

from shared.text.checksums import (
    aadhaar_ok,
    cnpj_ok,
    cpf_ok,
    iban_ok,
    korean_rrn_ok,
    luhn_ok,
    prc_resident_id_ok,
    ssn_ok,
    steuer_id_ok,
)
from shared.text.national_ids import KINDS, RU_PASSPORT, US_SSN, Kind, names_kind, printed
from shared.text.ordinary import ordinary_spans
from shared.text.scripts import CJK, HAN, HANGUL, KANA
from shared.text.spelled import spelled_edits
from shared.text.visible import View, edited, reading_view, then

Edits = Iterator[tuple[int, int, str]]

_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
# A query string's value: after `?key=` or `&key=`, up to the next mark that ends it.
_QUERY_VALUE = re.compile(r"[?&;][\w.\[\]-]{1,40}=([^\s&;#\"'<>]+)")
# A `+` inside a query value, read before percent-decoding as forms encode it: a space,
# unless it begins the value (a phone's `+` written raw: `?phone=+4930...`).
_PLUS = re.compile(r"(?<=.)\+")
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")
# Cyrillic and Greek letters drawn like Latin ones.
LOOKALIKES = dict(zip(
    "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХУІЈЅαοριυνκτχϲΑΒΕΖΗΙΚΜΝΟΡΤΥΧɑɡ",
    "aeopcyxijsdhlqwABEKMHOPCTXYIJSaopiuvktxcABEZHIKMNOPTYXag", strict=True))
_LOOKALIKE_CHARS = re.compile(f"[{''.join(LOOKALIKES)}]")
_TOKEN = re.compile(r"[\w.@%+-]+")
# "at" and "dot" in the served languages: English, German, Portuguese, Spanish, French,
# Russian, Hindi, Arabic, Chinese, Japanese, Korean.
AT_WORDS = "at|arroba|arobase|собака|एट|ऐट|آت|ات|艾特|アットマーク|アット|앳|골뱅이"
DOT_WORDS = "dot|punkt|ponto|punto|point|точка|डॉट|डॉट|दॉट|دوت|نقطة|点|點|ドット|닷|점"
_AT = (rf"[ \t]*[\[\(\{{<][ \t]*(?:at|@)[ \t]*[\]\)\}}>][ \t]*|[ \t]+@[ \t]*|[ \t]*@[ \t]+"
       rf"|[ \t]+(?:{AT_WORDS})[ \t]+")
_DOT = (rf"[ \t]*[\[\(\{{<][ \t]*(?:{DOT_WORDS}|\.)[ \t]*[\]\)\}}>][ \t]*"
        rf"|[ \t]+(?:{DOT_WORDS})[ \t]+|[ \t]*\.[ \t]*")
_LABEL = r"[^\W_](?:[\w+-]*[^\W_])?"
_AT_RE = re.compile(rf"(?i){_AT}")
_DOT_RE = re.compile(rf"(?i){_DOT}")
_MAYBE_SPELLED = re.compile(rf"(?i)[\[\(\{{<][ \t]*(?:at|dot)[ \t]*[\]\)\}}>]|\s@|@\s"
                            rf"|\s(?:{AT_WORDS})\s")
_DOMAIN = re.compile(rf"(?i){_LABEL}(?:(?:{_DOT}){_LABEL})+")
_LOCAL_END = re.compile(rf"(?i)(?<![\w.+-]){_LABEL}(?:(?:{_DOT}){_LABEL})*$")
_TLD = re.compile(r"^[^\W\d_]{2,24}$")
# Single characters each followed by one space; a quote, bracket or field mark may stand
# around the run ('"4 1 1 1 ..."', "card=4 1 1 1 ...").
# Two spaces between letter-spaced words ("B r u n o  H u e r t a s").
# "№" (NFKC "No") between a passport's spaced series and number is one piece of the run,
# and a Korean particle in brackets may follow the run ("... k r(으)로").
_SPACED = re.compile(rf"(?<![^\s\"'(\[{{<:=|])(?:(?:No(?=[ \t])|[^\s\"'{CJK}])[ \t]{{1,2}}){{4,}}"
                     rf"[^\s\"'{CJK}](?![^\s\"'()\]}}>,;.:|،؛。，、{CJK}])")
# (々 repeats the Han letter before it: "佐 々 木".)
_NATIVE_LETTER = ("’'\u0900-\u0963\u0971-\u097f\u0621-\u065f\u0670\u3041-\u30fa\u3005"
                  + HAN + HANGUL)
# Each letter stands alone: in Devanagari and Arabic a letter with another beside it is a
# word ("... द ा स ने": "ने" is the next word); CJK may run on after the last ("佐 藤 里 佳さん").
_ALONE = r"(?![\u0900-\u097f\u0621-\u065f\u0670])"
_NATIVE_SPACED = re.compile(rf"(?<![^\s\"'(\[{{<:=|{KANA}{HAN}])[{_NATIVE_LETTER}]"
                            rf"{_ALONE}(?:[ \t]{{1,2}}[{_NATIVE_LETTER}]{_ALONE}){{2,}}")
# A capital, then small letters; a one-letter family name ("U  M i n s u"), a hyphen or
# an apostrophe inside ("D ’ A l i a", "H a n s - M i c h a e l").
_SPACED_WORD = re.compile(r"^[^\W\d_a-z][^\W\d_A-Z]*(?:[-’'][^\W\d_a-z][^\W\d_A-Z]+)*$")
# Particles between a name's words ("H a d a s s a  d a  R o s a").
_SPACED_PARTICLE = re.compile(r"^(?:da|de|do|dos|das|del|della|di|du|van|von|der|den|la|le|"
                              r"bin|al|el|y|e)$")
MIN_SPACED_DIGITS = 9
# A token by its issuer's published prefix (GitHub, GitLab, Stripe, OpenAI, Slack, AWS,
# Google, npm, PyPI, SendGrid, Shopify, DigitalOcean) and enough characters after it:
# written letter by letter ("g h p _ k w j 1 ..."), it is read joined. Ordinary spaced
# letters ("a b c", "F B I") have no such prefix.
_SPACED_TOKEN = re.compile(r"^(?:gh[pousr]_|github_pat_|gl(?:pat|dt|rt|ptt|cbt|imt|soat)-|"
                           r"[spr]k_(?:live|test)_|sk-|xox[abposre]-|AKIA|ASIA|AIza|ya29\.|"
                           r"npm_|pypi-|SG\.|whsec_|shp(?:at|ca|pa|ss)_|do[por]_v1_)"
                           r"[A-Za-z0-9_.-]{16,}$")
# Middle dots and bullets between digit groups ("2202·4665·2532", "910411·1777631"): three
# groups or more, or a long group beside the dot; one dot between short groups is a decimal
# point in some journals' style ("0·61-0·84", "p=0·0001"), not a separator.
_ANY_DOT = re.compile(r"\d[ \t]*[·•∙‧⋅・･]")
_DOT_MARK = re.compile(r"[ \t]*[·•∙‧⋅・･][ \t]*")
_DOT_RUN = re.compile(r"\d+(?:[ \t]*[·•∙‧⋅・･][ \t]*\d+){2,}|(?<!\d)\d{4,}[ \t]*[·•∙‧⋅・･][ \t]*\d+"
                      r"|\d+[ \t]*[·•∙‧⋅・･][ \t]*\d{5,}")
# A value cut into short pieces by odd or mixed separators ("52/49/12/97/76/80/12/40",
# "SA·96·06·11·30", "E / S / 6 / 0 / 6", "330 106 195 005 152 947", "B.R\n3 - 1 0·9 / 6"):
# five pieces or more of at most four letters or digits, four after a `+` or a trunk `0`
# ("+821 / 080\n547", "016.964.415.89").
_SEP = r"(?:[ \t\n]*[/·•∙‧⋅・･.\-_])+[ \t\n]*|[ \t\n]+"
_PIECES = re.compile(rf"(?<![\w+])(?:\+?[A-Z0-9]{{1,4}}(?:(?:{_SEP})[A-Z0-9]{{1,4}}){{4,}}"
                     rf"|(?:\+|0)\d{{0,3}}(?:(?:{_SEP})\d{{1,4}}){{3}})(?![\w])")
_PIECE = re.compile(r"\+?[A-Z0-9]+")
_FEW_PIECES = re.compile(r"(?<![\w+./·\-])(?<![\d+][ \t\n])\d{2,4}"
                         r"(?:[ \t]*[./·\-_\n][ \t]*\d{1,4}|[ \t]+\d{1,4}){2,3}"
                         r"(?![\w]|[ \t]?[./·\-\n]?[ \t]?\d)")
# What a run of pieces must not hold: a date, a time, an IPv4 address (octets up to 255,
# no leading zero: "016.964.415.89" is a phone's groups).
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_STRUCTURED = re.compile(rf"\d{{4}}-\d\d-\d\d|\d:\d\d|(?<![\d./·\-]){_OCTET}(?:\.{_OCTET}){{3}}"
                         r"(?![.·/\-]?\d)")
TRIM = 3  # pieces a run may have before or after the value (words, a label)
_PIECE_SEP = re.compile(_SEP)
_BETWEEN = re.compile(r"(?<=\d)(?:[ \t]*(?P<dot>\\[nrt])[ \t]*"
                      r"|[ \t]+(?P<mark>[-./])[ \t]*|(?P<mark2>[-./])[ \t]+)(?=\d)")


def normalised_view(text: str) -> View:
    """`text` as a person reads it (module docstring), mapped back to `text`."""
    view = reading_view(text)
    for step in _STEPS:
        view = then(view, step(view.text))
    return view


# Chinese and Japanese (and Korean particles) stand right beside a Latin-script value:
# "としてj.ito@gmail.comを", "이메일로 g.kim@example.kr을", "APIキーとしてAKIA...を".
_CJK_CHAR = CJK + "\uff01-\uff0f\u3000-\u303f"
_NUMERALS = frozenset("〇零一二三四五六七八九공영일이삼사오육칠팔구")
# Latin letters and those drawn like them ("更新为хiong.chao@..." has a Cyrillic х first).
_LATIN_LIKE = "A-Za-z0-9" + "".join(LOOKALIKES)
_SCRIPT_GAP = re.compile(rf"[{_CJK_CHAR}](?=[{_LATIN_LIKE}+@])|(?<=[{_LATIN_LIKE}])[{_CJK_CHAR}]")


def _latin_like(c: str) -> bool:
    return c.isascii() or c in LOOKALIKES


def _script_gaps(text: str) -> View | None:
    """A space between a CJK character and a Latin letter or digit beside it, as between
    words of any other script, so that a value's patterns see where it starts and ends."""
    if text.isascii() or not _SCRIPT_GAP.search(text):
        return None
    return edited(text, ((m.start(), m.end(),
                          m.group() + " " if m.end() < len(text) and _latin_like(text[m.end()])
                          and (m.start() == 0 or not _latin_like(text[m.start() - 1]))
                          else " " + m.group())
                         for m in _SCRIPT_GAP.finditer(text)
                         if m.group() not in _NUMERALS))  # "...九一四一X": one number


def _query_values(text: str) -> View | None:
    """A URL query value decoded as forms encode it: each `+` a space (not a leading one),
    then its percent-encoding, so an encoded `%2B` stays a plus and every encoded word of
    a value reads, whatever stands around it."""
    if "=" not in text or ("+" not in text and "%" not in text):
        return None
    edits: list[tuple[int, int, str]] = []
    for m in _QUERY_VALUE.finditer(text):
        value, at = m.group(1), m.start(1)
        edits += [(at + p.start(), at + p.end(), " ") for p in _PLUS.finditer(value)]
        edits += [(at + a, at + b, decoded) for a, b, decoded in _decoded(value)]
    return edited(text, sorted(edits)) if edits else None


def _percent(text: str) -> View | None:
    if "%" not in text or not _PERCENT.search(text):
        return None
    return edited(text, _percent_edits(text))


def _escapes(text: str) -> View | None:
    """JSON and source escapes `\\u00b7` read as the character they stand for."""
    if "\\u" not in text or not _ESCAPE.search(text):
        return None
    return edited(text, ((m.start(), m.end(), chr(int(m.group(1), 16)))
                         for m in _ESCAPE.finditer(text)
                         if chr(int(m.group(1), 16)).isprintable()))


def _percent_edits(text: str) -> Edits:
    for a, b, decoded in _decoded(text):
        if (a > 0 and not text[a - 1].isspace()) or (b < len(text) and not text[b].isspace()):
            yield a, b, decoded  # inside a token: "anna%40example.com"


def _decoded(text: str) -> Edits:
    """Each run of percent-encoded bytes that is printable UTF-8, decoded."""
    for m in _PERCENT.finditer(text):
        try:
            decoded = bytes.fromhex(m.group().replace("%", "")).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if decoded.isprintable():
            yield m.start(), m.end(), decoded


def _lookalikes(text: str) -> View | None:
    if text.isascii() or not _LOOKALIKE_CHARS.search(text):
        return None
    return edited(text, _lookalike_edits(text))


def _lookalike_edits(text: str) -> Edits:
    for token in _TOKEN.finditer(text):
        word = token.group()
        if word.isascii() or not _LOOKALIKE_CHARS.search(word):
            continue
        others = [c for c in word if not c.isascii()]
        latin = any(c.isascii() and c.isalpha() for c in word) or "@" in word
        if latin and all(c in LOOKALIKES for c in others):
            for i, c in enumerate(word, token.start()):
                if c in LOOKALIKES:
                    yield i, i + 1, LOOKALIKES[c]


def _spelled(text: str) -> View | None:
    return edited(text, spelled_edits(text))


def _addresses(text: str) -> View | None:
    if not _MAYBE_SPELLED.search(text):
        return None
    return edited(text, _address_edits(text))


def _address_edits(text: str) -> Edits:
    """The `@` and dots of every address written with them spelled or spaced."""
    done, pos = 0, 0
    while (at := _AT_RE.search(text, pos)) is not None:
        pos = at.start() + 1  # overlapping: "mail at at example dot com"
        if at.start() < done:
            continue
        local = _LOCAL_END.search(text, max(0, at.start() - 80), at.start())
        domain = _DOMAIN.match(text, at.end())
        if local is None or domain is None:
            continue
        dots = [d for d in _DOT_RE.finditer(domain.group())]
        labels = _DOT_RE.split(domain.group())
        if not _TLD.match(labels[-1]):
            continue
        plain_at = at.group().strip().lower() in AT_WORDS.split("|")
        if plain_at and all(d.group() == "." for d in dots):
            continue  # "docs at docs.python.org": a site, not a mailbox
        for d in _DOT_RE.finditer(local.group()):
            yield local.start() + d.start(), local.start() + d.end(), "."
        yield at.start(), at.end(), "@"
        for d in dots:
            yield domain.start() + d.start(), domain.start() + d.end(), "."
        done = domain.end()


def _letter_spaced(text: str) -> View | None:
    native = not text.isascii() and _NATIVE_SPACED.search(text) is not None
    if not (_SPACED.search(text) or native):
        return None
    edits = list(_spaced_edits(text))
    if native:
        taken = [(a, b) for a, b, _ in edits]
        edits += [e for e in _native_spaced_edits(text)
                  if not any(a <= e[0] < b for a, b in taken)]
    return edited(text, sorted(edits))


def _native_spaced_edits(text: str) -> Edits:
    """Names written letter by letter in Devanagari, Arabic, Han, kana or Hangul ("김 은
    지", "अ ं क ि त ा  म ह र ा"): read joined, two spaces between words as one."""
    for m in _NATIVE_SPACED.finditer(text):
        for gap in re.finditer(r"[ \t]+", m.group()):
            yield (m.start() + gap.start(), m.start() + gap.end(),
                   " " if len(gap.group()) == 2 else "")


def _spaced_edits(text: str) -> Edits:
    for m in _SPACED.finditer(text):
        run, start = m.group(), m.start()
        # A one-letter word or a mark before a spaced value stays as written ("a + 3 4  6
        # 2 7 ...", "à M a u r i c e", ": P a u l i n e").
        while re.match(r"(?:[a-zà-ÿ]|[^\w\s])[ \t]+[+\dA-ZÀ-Þ]", run):
            cut = re.match(r"(?:[a-zà-ÿ]|[^\w\s])[ \t]+", run)
            assert cut is not None
            run, start = run[cut.end():], start + cut.end()
        run = re.sub(r"(?:[ \t]+[^\w\s@+(])+$", "", run)  # "... o t ;": the mark after it
        joined = re.sub(r"[ \t]", "", run)
        digits = sum(c.isdigit() for c in joined)
        letters = sum(c.isalpha() for c in joined)
        marks = len(joined) - digits - letters
        # An address, or a number: digits with at most a few letters (an IBAN's country
        # and bank code) and the marks numbers are written with.
        number = digits >= MIN_SPACED_DIGITS and marks <= 4 and (
            letters <= 2 or (letters <= 6 and digits >= 12))
        if _SPACED_TOKEN.match(joined):
            for gap in re.finditer(r"[ \t]+", run):
                yield start + gap.start(), start + gap.end(), ""
            continue
        if "@" in joined or (number and all(c.isalnum() or c in ".-/+()" for c in joined)):
            # two spaces part a number's groups ("6 1 7  0 1  9 4": "617 01 94")
            for gap in re.finditer(r"[ \t]+", run):
                yield (start + gap.start(), start + gap.end(),
                       " " if len(gap.group()) == 2 and "@" not in joined else "")
            continue
        # Words written letter by letter, two spaces between words ("B r u n o  H u e r t a
        # s"): read as words when each is written as a name (a capital, then small letters).
        words = [re.sub(r"[ \t]", "", w) for w in re.split(r"[ \t]{2}", run)]
        if len(words) >= 2 and len(joined) >= 5 and all(
                _SPACED_WORD.match(w) or (0 < i < len(words) - 1 and _SPACED_PARTICLE.match(w))
                for i, w in enumerate(words)):
            for gap in re.finditer(r"[ \t]+", run):
                yield (start + gap.start(), start + gap.end(),
                       " " if len(gap.group()) == 2 else "")


# Countries whose banks issue IBANs (the SWIFT registry).
IBAN_COUNTRIES = frozenset(str.split(
    "AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE "
    "GI GL GR GT HN HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT "
    "MU NI NL NO OM PK PL PS PT QA RO RS RU SA SC SD SE SI SK SM SO ST SV TL TN TR UA VA VG "
    "XK YE"))
# An IBAN's start with its country's letters apart or spaced ("F R 76...", "G B one eight"
# read as "G B 18", "BR 08 140 ..."), then letters, digits and separators.
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Z])[ \t\n·.\-/]{0,3}([A-Z])[ \t\n·.\-/,]{0,3}\d")
_IBAN_PART = re.compile(r"[A-Z0-9]+|[ \t\n,;·•∙‧⋅・･./\-_]{1,4}")
MAX_IBAN = 34


def _ibans(text: str) -> View | None:
    """An IBAN written with separators anywhere, its country's letters apart included, read
    compact where the longest such reading passes mod 97."""
    if not _IBAN_START.search(text):
        return None
    edits = []
    for m in _IBAN_START.finditer(text):
        if m[1] + m[2] not in IBAN_COUNTRIES:
            continue
        chars, seps, pos, best = m[1] + m[2], [], m.end(2), None
        gap = text[pos:m.end() - 1]
        if gap:
            seps.append((pos, m.end() - 1))
        pos = m.end() - 1
        while len(chars) < MAX_IBAN:
            part = _IBAN_PART.match(text, pos)
            if part is None:
                break
            if part.group()[0].isalnum():
                chars += part.group()
                if len(chars) > MAX_IBAN:
                    break
                # a reading ends where a word does not go on ("...705C 8\nVamos": not "8V")
                if len(chars) >= 15 and iban_ok(chars) and \
                        not text[part.end():part.end() + 1].isalpha():
                    best = (part.end(), list(seps))
            else:
                seps.append(part.span())
            pos = part.end()
        if best is not None and len(best[1]) + (m.end(1) < m.start(2)) > 0:
            end, cut = best
            if m.end(1) < m.start(2):
                edits.append((m.end(1), m.start(2), ""))
            edits += [(a, b, "") for a, b in cut if b <= end]
    return edited(text, sorted(set(edits))) if edits else None


def _pieces(text: str) -> View | None:
    """A run of short pieces read as one value where that value passes a check: a card's
    Luhn, an IBAN's mod 97, a national number's check digits, a valid `+` phone number.
    Dates, versions, addresses and lists of numbers fail these and stay as written."""
    many = _PIECES.search(text) is not None
    few = _FEW_PIECES.search(text) is not None
    if not (many or few):
        return None
    edits: list[tuple[int, int, str]] = []
    named = [k for k in KINDS if names_kind(k, text)]
    phone = PHONE_WORDS.search(text) is not None
    if few and (named or phone):
        runs = [m.span() for m in _PIECES.finditer(text)] if many else []
        edits += [e for e in _few_pieces(text, named)
                  if not any(a <= e[0] < b for a, b in runs)]
    if not many:
        return edited(text, sorted(edits)) if edits else None
    # kinds with no check digit, taken where the text names them
    passport, ssn = RU_PASSPORT in named, US_SSN in named
    ordinary = ordinary_spans(text)  # an amount's or a version's groups are not a value's
    for m in _PIECES.finditer(text):
        pieces = list(_PIECE.finditer(text, m.start(), m.end()))
        # a phone without a trunk prefix only from odd marks: spaces are how one is printed
        odd = phone and not re.fullmatch(r"[\d \t\n+]+", m.group())
        found = next(((i, j) for i in range(min(TRIM + 1, len(pieces)))
                      for j in range(len(pieces), max(i + 1, len(pieces) - TRIM - 1), -1)
                      if checked_value("".join(p.group() for p in pieces[i:j]), passport, ssn,
                                       odd)
                      and not _STRUCTURED.search(text, pieces[i].start(), pieces[j - 1].end())
                      and not _inside_number(text, pieces, i, j)
                      and not _overlaps(ordinary, pieces[i].start(), pieces[j - 1].end())),
                     None)
        if found is not None and _cuts_lines(text, pieces, *found):
            found = None
        if found is not None:
            i, j = found
            if printed(text[pieces[i].start():pieces[j - 1].end()]):
                continue  # already in its printed form ("11.222.333/0001-81"): leave it so
            edits += [(a.end(), b.start(), "") for a, b in zip(pieces[i:j - 1], pieces[i + 1:j],
                                                               strict=True)]
    return edited(text, sorted(edits)) if edits else None


def _overlaps(spans: tuple[tuple[int, int], ...], start: int, end: int) -> bool:
    return any(a < end and start < b for a, b in spans)


def _inside_number(text: str, pieces: list[re.Match[str]], i: int, j: int) -> bool:
    """Whether pieces i..j start or end inside a number written with one dot or comma
    between its groups: "085.600.422" of "IDR 5.085.600.422" is an amount's tail."""
    def glued(a: re.Match[str], b: re.Match[str]) -> bool:
        return (text[a.end():b.start()] in (".", ",") and a.group()[-1:].isdigit()
                and b.group()[:1].isdigit())
    return (i > 0 and glued(pieces[i - 1], pieces[i])) or (
        j < len(pieces) and glued(pieces[j - 1], pieces[j]))


def _cuts_lines(text: str, pieces: list[re.Match[str]], i: int, j: int) -> bool:
    """Whether a value read over a line break starts or ends inside one line's run of digit
    groups, or holds a line that is a phone number on its own: two phones on two lines
    ("06 49 46 72 97\n01 23 64 26 21") are not one number."""
    if "\n" not in text[pieces[i].start():pieces[j - 1].end()]:
        return False

    def same_line_digits(a: re.Match[str], b: re.Match[str]) -> bool:
        return "\n" not in text[a.end():b.start()] and a.group()[-1:].isdigit() \
            and b.group()[:1].isdigit()
    if (i > 0 and same_line_digits(pieces[i - 1], pieces[i])) or \
            (j < len(pieces) and same_line_digits(pieces[j - 1], pieces[j])):
        return True
    # a line whose own pieces are a phone number already ("612 34 53 80\n810 12 37 93")
    lines: list[list[re.Match[str]]] = [[pieces[i]]]
    for a, b in zip(pieces[i:j - 1], pieces[i + 1:j], strict=True):
        if "\n" in text[a.end():b.start()]:
            lines.append([])
        lines[-1].append(b)
    return any(len(value) >= MIN_SPACED_DIGITS and value.lstrip("+").isdigit()
               and (_valid_phone(value) or _valid_phone(value, NO_TRUNK))
               for value in ("".join(p.group() for p in line) for line in lines))


def _few_pieces(text: str, named: list[Kind]) -> Edits:
    """Three or four groups of digits, odd marks or line breaks between them
    ("4610.6211.57", "Steuer-ID: 439\n601\n712\n89") read as one number where the text
    names a kind (`named`) whose check the digits pass (a Russian passport's ten digits,
    an SSN's nine in the issued ranges), or as a phone number: with its trunk prefix
    ("0141.0819.25"), or of a plan without one where its line names a phone ("6125.8704.2
    como teléfono")."""
    ordinary = ordinary_spans(text)
    for m in _FEW_PIECES.finditer(text):
        if _overlaps(ordinary, m.start(), m.end()):
            continue
        digits = re.sub(r"\D", "", m.group())
        end = text.find("\n", m.end())
        line = text[text.rfind("\n", 0, m.start()) + 1:len(text) if end < 0 else end]
        odd = re.search(r"[./·\-_]", m.group()) is not None
        phone = odd and len(digits) <= 12 and (
            # a trunk prefix: "0141.0819.25", Russia's 8 ("891.234.566.60")
            ((digits[0] == "0" or (digits[0] == "8" and len(digits) == 11))
             and _valid_phone(digits))
            or (PHONE_WORDS.search(line) is not None and _valid_phone(digits, NO_TRUNK)))
        if not (phone or any(k.check(digits) for k in named)):
            continue
        if _STRUCTURED.search(m.group()) or printed(m.group()):
            continue
        for gap in re.finditer(r"[^\d]+", m.group()):
            yield m.start() + gap.start(), m.start() + gap.end(), ""


def checked_value(value: str, passport_named: bool = False, ssn_named: bool = False,
                  phone_named: bool = False) -> bool:
    """Whether `value` (letters and digits, a `+` first for a phone) is a personal number
    that its check digits confirm, or where the text names a kind without check digits:
    ten digits (`passport_named`: a Russian passport), nine in the issued ranges
    (`ssn_named`: a US social security number), and a national phone number of a plan
    written without a trunk prefix (`phone_named`: Spain's, the US's ...)."""
    digits = sum(c.isdigit() for c in value)
    if digits < MIN_SPACED_DIGITS:
        return False
    if value.startswith("+") or (value[0] in "08" and value.isdigit() and len(value) <= 12):
        return _valid_phone(value)
    if value.isdigit() and len(value) <= 11 and (phone_named or BARE_MOBILE.match(value)) \
            and _valid_phone(value, NO_TRUNK):
        return True
    if value[:2].isalpha() and value[:2].isupper():
        return iban_ok(value)
    if prc_resident_id_ok(value):
        return True
    if not value.isdigit():
        return False
    if (passport_named and len(value) == 10) or (ssn_named and ssn_ok(value)):
        return True
    return ((13 <= len(value) <= 19 and luhn_ok(value)) or cpf_ok(value) or cnpj_ok(value)
            or aadhaar_ok(value) or korean_rrn_ok(value) or steuer_id_ok(value))


# Regions whose national numbers (trunk prefix 0, or 8 in Russia) are read this way.
TRUNK_REGIONS = ("GB", "DE", "FR", "ES", "BR", "IN", "CN", "JP", "KR", "SA", "AE", "EG", "RU")


# Served regions whose national numbers are written without a trunk prefix.
NO_TRUNK = ("US", "ES", "BR", "IN", "CN")
# Mobile numbers of the served locales as people type them, digits only.
BARE_MOBILE = re.compile(
    r"^(?:[6-9]\d{9}|1[3-9]\d{9}|[1-9][1-9]9\d{8}|01[016789]\d{7,8}|[78]9\d{9}|"
    r"0[789]0\d{8}|01[5-7]\d{8,9}|05\d{8}|07\d{9}|01[0-25]\d{8})$")
# Words that name a phone number, in the served languages.
PHONE_WORD = (r"phone|\btel\b|teléfono|telefone|telefon|celular|móvil|movil|"
              r"handy|téléphone|телефон|电话|手机|電話|携帯|전화|휴대폰|फ़ोन|फोन|هاتف|جوال")
PHONE_WORDS = re.compile(rf"(?i){PHONE_WORD}")


def _valid_phone(value: str, regions: tuple[str, ...] = TRUNK_REGIONS) -> bool:
    """A valid number with its country code (`+...`), or in a served region's national
    format (`0...`, Russia's `8...`; `regions`)."""
    for region in (None,) if value.startswith("+") else regions:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(value, region)):
                return True
        except phonenumbers.NumberParseException:
            continue
    return False


def _between_digits(text: str) -> View | None:
    dotted = _DOT_RUN.search(text) if _ANY_DOT.search(text) else None
    if dotted is None and not _BETWEEN.search(text):
        return None
    edits = [(m.start(), m.end(), " " if m["dot"] else (m["mark"] or m["mark2"]))
             for m in _BETWEEN.finditer(text)]
    if dotted is not None:
        edits += [(d.start(), d.end(), " ") for run in _DOT_RUN.finditer(text)
                  for d in _DOT_MARK.finditer(text, run.start(), run.end())]
    return edited(text, sorted(edits))


_STEPS: tuple[Callable[[str], View | None], ...] = (
    _script_gaps, _escapes, _query_values, _percent, _lookalikes, _spelled, _addresses,
    _letter_spaced, _ibans, _pieces, _between_digits)
