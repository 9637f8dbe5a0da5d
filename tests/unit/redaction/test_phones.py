"""Phone numbers: everything Presidio's recognizer finds, plus possible but unassigned ones."""

from __future__ import annotations

import random
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from scripts.benchlib.pii_corpus import VALUES
from services.redaction.phones import PossiblePhoneRecognizer, snippets

REGIONS = ["US", "GB", "DE", "FR", "IN"]
PRESIDIO = PhoneRecognizer(supported_regions=REGIONS)
OURS = PossiblePhoneRecognizer(REGIONS)
UNFILTERED = PossiblePhoneRecognizer(REGIONS, prefilter=False)
NOISE = ["call", "x", "ext. 12", "fax:", "4111 1111 1111 1111", "10.0.4.17", "2026-11-28",
         "(", ")", "+", "-", "\n", "12", "order #77812", "v2.4.1", "port 8080"]
NOT_PHONES = ("port 8443", "build 20261128", "release 4.12.3", "10.0.4.17", "2026-11-28",
              "Ticket #48213", "order 7741-2209", "v2.4.1", "at 14:05 UTC", "HTTP 502")


def spans(rec: PhoneRecognizer | PossiblePhoneRecognizer, text: str) -> list[tuple[int, int]]:
    return sorted((x.start, x.end) for x in rec.analyze(text, ["PHONE_NUMBER"]))


def covered(rec: PossiblePhoneRecognizer, text: str, start: int, end: int) -> bool:
    return any(a <= start and end <= b for a, b in spans(rec, text))


IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(VALUES["PHONE_NUMBER"]) + NOISE), max_size=12),
       st.sampled_from([" ", "  ", ", ", "; "]))
@example(["port 8080", "10.0.4.17"], " ")  # Presidio: "8080 10.0.4.17" is a phone
# Presidio: "0.4.17 (212) 555-0142" is one phone, starting inside the address
@example(["+1 415-555-0199", "x", "10.0.4.17", "(212) 555-0142"], " ")
@example(["+49 30 901820", "10.0.4.17"], " ")  # the number was lost with the address
def test_finds_everything_presidio_finds_and_the_prefilter_changes_nothing(
        parts: list[str], sep: str) -> None:
    """Presidio matches that run into an IPv4 address are held to their part outside it:
    digits glued to an address are no phone number (NOT_PHONES), and the address is
    masked as IP_ADDRESS anyway, but a number beside the address must still be found.
    Dates Presidio takes for phones are the exception: a date is never masked
    (test_business_text.py)."""
    text = sep.join(parts)
    ours = spans(OURS, text)
    assert ours == spans(UNFILTERED, text)
    for a, b in spans(PRESIDIO, text):
        a, b = outside_addresses(text, a, b)
        if sum(c.isdigit() for c in text[a:b]) >= 7 and not ISO_DATE.fullmatch(text[a:b]):
            assert any(x <= a and b <= y for x, y in ours), (text, (a, b))


def outside_addresses(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) shrunk past every IPv4 address it overlaps at either end, and past the
    separators beside them (an address in the middle of a match leaves it whole)."""
    for ip in IPV4.finditer(text):
        if ip.start() < end and start < ip.end():
            if ip.start() <= start:
                start = ip.end()
            elif ip.end() >= end:
                end = ip.start()
    while start < end and not (text[start].isalnum() or text[start] in "+("):
        start += 1
    while end > start and not (text[end - 1].isalnum() or text[end - 1] == ")"):
        end -= 1
    return start, end


def test_every_known_number_is_found_at_its_place() -> None:
    for number in VALUES["PHONE_NUMBER"]:
        text = f"Ring {number} after nine."
        assert spans(OURS, text) == [(5, 5 + len(number))]


def test_the_whole_north_american_area_code_space_in_every_usual_shape() -> None:
    """Assigned or not: every NXX area code, written the ways people write numbers."""
    rng = random.Random(7)
    shapes = ("({a}) {e}-{s}", "{a}-{e}-{s}", "{a}.{e}.{s}", "+1 {a} {e} {s}", "+1-{a}-{e}-{s}",
              "1 ({a}) {e}-{s}", "({a}) {e}-{s} x{x}", "{a}-{e}-{s} ext. {x}", "+1{a}{e}{s}")
    missed = []
    for area in range(200, 1000):
        exchange = rng.randint(200, 999)
        shape = shapes[area % len(shapes)]
        number = shape.format(a=area, e=exchange, s=f"{rng.randint(0, 9999):04d}",
                              x=rng.randint(1, 9999))
        text = f"Customer wrote: {number}. Please follow up."
        if not covered(OURS, text, 16, 16 + len(number)):
            missed.append(number)
    assert missed == []


def test_e164_numbers_of_many_regions_are_found_whatever_the_configured_regions() -> None:
    import phonenumbers
    rng = random.Random(11)
    for region in ("BR", "JP", "ES", "IT", "AU", "MX", "NG", "PL", "SE", "KR"):
        example = phonenumbers.example_number(region)
        assert example is not None
        number = phonenumbers.format_number(example, phonenumbers.PhoneNumberFormat.E164)
        text = f"{rng.choice(['Mobile', 'reach me on', 'ph'])} {number} thanks"
        start = text.index("+")
        assert covered(OURS, text, start, start + len(number)), number


def test_numbers_that_are_not_phones_are_left_alone() -> None:
    for text in NOT_PHONES:
        assert spans(OURS, f"We saw {text} in the logs.") == [], text


def test_text_without_digit_chains_costs_no_matcher_call() -> None:
    assert snippets("No numbers here, only 3 words and 12 more.") == []
    assert snippets("x" * 100 + "415 555 0199") == [(68, 112)]


def test_possible_numbers_of_every_configured_region_in_every_format() -> None:
    """Random subscriber digits (so mostly unassigned) in each region's own formats."""
    import phonenumbers
    from phonenumbers import PhoneNumberFormat as F
    from phonenumbers import PhoneNumberType as T

    from services.redaction.settings import RedactionSettings

    regions = RedactionSettings().phone_regions
    rec = PossiblePhoneRecognizer(list(regions))
    rng = random.Random(2026)
    missed = []
    for region in regions:
        for kind in (T.FIXED_LINE, T.MOBILE):
            example = phonenumbers.example_number_for_type(region, kind)
            if example is None:
                continue
            national = str(example.national_number)
            for _ in range(4):
                digits = national[:2] + "".join(rng.choice("0123456789")
                                                for _ in national[2:])
                number = phonenumbers.parse(f"+{example.country_code}{digits}")
                for fmt in (F.E164, F.INTERNATIONAL, F.NATIONAL):
                    value = phonenumbers.format_number(number, fmt)
                    prefix = phonenumbers.PhoneMetadata.metadata_for_region(region)
                    if fmt == F.NATIONAL and value.isdigit() and prefix.national_prefix:
                        # phonenumbers leaves an unassigned number unformatted, without
                        # the trunk prefix a person dialling it nationally would write
                        value = prefix.national_prefix + value
                    # Digits alone read as a phone only after a cue (an order or PO
                    # number looks the same): test_bare_digits_need_a_cue.
                    lead = "Customer phone: " if value.isdigit() else "Customer wrote: "
                    text = f"{lead}{value}. Please follow up."
                    if not covered(rec, text, 16, 16 + len(value)):
                        missed.append((region, value))
    assert missed == []


ALL_REGIONS = list(__import__("services.redaction.settings", fromlist=["x"])
                   .RedactionSettings().phone_regions)
OURS_ALL = PossiblePhoneRecognizer(ALL_REGIONS)
UNFILTERED_ALL = PossiblePhoneRecognizer(ALL_REGIONS, prefilter=False)
_blocks = st.lists(st.text("0123456789", min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["", "+", "(", "0", "00", "+1 ", "+49 ", "+44 (0)"]), _blocks,
       st.sampled_from([" ", "-", ".", "/", ") ", "", "x", " x "]),
       st.sampled_from(["Call ", "We measured ", "tel: ", "", "n = "]),
       st.sampled_from(["", " ext. 12", " ext", " today.", "\n", " x 3", " int 4", "#7",
                        " extension 99", " EXT", " доб. 5", " anexo 3", " patients"]))
def test_skipping_regions_by_chain_length_changes_nothing(
        lead: str, blocks: list[str], sep: str, before: str, after: str) -> None:
    """Every default region, numbers of 1-20 digits in phone and prose shapes: a region is
    skipped only where no number is possible, so the spans equal a whole-text run's."""
    text = f"{before}{lead}{sep.join(blocks)}{after}"
    assert spans(OURS_ALL, text) == spans(UNFILTERED_ALL, text), text


def test_a_region_is_skipped_only_below_its_shortest_possible_number() -> None:
    from services.redaction.phones import shortest_possible

    # German numbers can be two digits long; US ones (seven, local only) cannot be shorter.
    assert shortest_possible("DE") <= 4 < shortest_possible("US") == 7
    # A German 5-digit local number is found although only a few regions run on it.
    assert spans(OURS_ALL, "Tel. 030 12345") == [(5, 14)] == spans(UNFILTERED_ALL,
                                                                  "Tel. 030 12345")


def test_bare_digits_need_a_cue() -> None:
    """Digits alone are as often an order or PO number as a phone: they are one after a
    cue, alone on a line, with a trunk prefix, in a served mobile shape, or in a table
    with a phone column; never as a record's number, a date or a time stamp."""
    rec = PossiblePhoneRecognizer(["US", "GB", "IN", "CN", "BR"])
    for text in ("call me on 4155550123", "4155550123", "ring 02079460958 today",
                 "note 9876543210 (an Indian mobile)", "微信 13812345678",
                 "id,phone\n1,4155550123\n2,6175550111",
                 "write to ana@example.net or 1366870945 today"):
        assert spans(rec, text), text
    for text in ("PO 4500123456 approved", "PO number 4155550123", "order 4155550123 shipped",
                 "ORD-2026-595105", "build 20261210.3", "ts 1735689600", "batch 4155550123",
                 "total EUR 344.648,56", "at 2026-02-25 22:04:05.666+05:30",
                 "opened (20220302)", "order,total\n4155550123,12"):
        assert spans(rec, f"We saw {text} in the logs.") == [], text


def test_russian_phone_labels_in_any_case_and_order_numbers_first() -> None:
    ru = PossiblePhoneRecognizer(["RU"])
    assert spans(ru, "номер телефона: 83014161851") == [(16, 27)]
    assert spans(ru, "Номер заказа: 4500123456, номер счёта: 9123456789.") == []
