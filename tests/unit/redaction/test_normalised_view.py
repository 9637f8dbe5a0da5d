"""shared.text.reader: the normalised view reads what a person reads (spelled digits,
look-alike letters, spelled or spaced e-mail marks, percent-encoding, odd separators)
and maps every character back to the original characters it was read from."""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.text.encoded import blobs, payloads
from shared.text.reader import normalised_view
from tests.unit.redaction import pii_forms as forms

FEW = settings(max_examples=300, deadline=None)


def reads(text: str) -> str:
    return normalised_view(text).text


@FEW
@given(st.text())
def test_every_view_character_maps_inside_the_text_in_order(text: str) -> None:
    view = normalised_view(text)
    spans = [view.span(i, i + 1) for i in range(len(view.text))]
    assert all(0 <= a < b <= len(text) for a, b in spans)
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)


@FEW
@given(st.from_regex(r"[0-9]{7,16}", fullmatch=True), st.sampled_from(sorted(forms.WORDS)),
       st.booleans(), st.integers(0, 2**32))
def test_spelled_digits_read_as_their_digits_and_map_back_whole(
        digits: str, lang: str, mixed: bool, seed: int) -> None:
    spelled = forms.spelled(digits, lang, random.Random(seed), mixed=mixed)
    text = f"call me on {spelled} tonight"
    view = normalised_view(text)
    # as digits, or a national number's printed form where its check holds ("56 702 ...")
    found = re.search(r"\d[\d .\-/]*\d", view.text)
    assert found is not None and re.sub(r"\D", "", found.group()) == digits, view.text
    start, end = view.span(*found.span())
    assert text[start:end] == spelled


@FEW
@given(st.from_regex(r"[0-9]{7,12}", fullmatch=True),
       st.sampled_from([forms.CJK, forms.HANGUL]))
def test_east_asian_numerals_read_as_digits(digits: str, table: str) -> None:
    assert reads(f"번호 {forms.east_asian(digits, table)} 입니다") == f"번호 {digits} 입니다"


@FEW
@given(st.lists(st.from_regex(r"[0-9]{2,4}", fullmatch=True), min_size=3, max_size=5),
       st.sampled_from(["·", "•", "・", " - ", " . ", "\u00a0", "\u202f", "\\n"]))
def test_separator_runs_between_digits_read_as_one_mark(groups: list[str], sep: str) -> None:
    read = reads("no. " + sep.join(groups) + " end")
    assert re.sub(r"[ .-]", "", read.removeprefix("no. ").removesuffix(" end")) == \
        "".join(groups), read


@FEW
@given(st.from_regex(r"[a-z]{2,8}(\.[a-z]{2,8})?", fullmatch=True),
       st.from_regex(r"[a-z]{3,10}", fullmatch=True), st.sampled_from(["com", "de", "io"]),
       st.sampled_from([(" at ", " dot "), (" [at] ", " [dot] "), ("(at)", "(dot)"),
                        (" AT ", " DOT "), (" @ ", " . "), ("@", "."), (" [at] ", ".")]))
def test_spelled_and_spaced_addresses_read_as_addresses(
        local: str, domain: str, tld: str, marks: tuple[str, str]) -> None:
    at, dot = marks
    written = local.replace(".", dot) + at + domain + dot + tld
    assert reads(f"mail {written} now") == f"mail {local}@{domain}.{tld} now"


def test_look_alike_letters_read_as_latin_in_latin_words_only() -> None:
    assert reads("аnnа@ехаmple.com") == "anna@example.com"  # Cyrillic а, е, х
    assert reads("Ρaypal.com") == "Paypal.com"  # Greek Ρ
    assert reads("Привет, Анна") == "Привет, Анна"  # Russian stays Russian
    assert reads("ОСА и сор") == "ОСА и сор"  # so do words made of look-alikes only


def test_letter_spaced_addresses_and_numbers_read_joined() -> None:
    assert reads("mail j o h n . s m i t h @ g m a i l . c o m") == "mail john.smith@gmail.com"
    assert reads('{"card": "4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"}') == \
        '{"card": "4111111111111111"}'
    assert reads("I a m h e r e") == "I a m h e r e"  # no address, no number


def test_percent_and_json_escapes_are_decoded_inside_tokens() -> None:
    assert reads("GET /u?email=anna%40example.com&tel=%2B4930901820") == \
        "GET /u?email=anna@example.com&tel=+4930901820"
    assert reads(r'"card": "2202\u00b74665"') == '"card": "2202 4665"'
    assert reads("growth of 20 % 40 units") == "growth of 20 % 40 units"


def test_prose_numbers_and_words_stay_as_written() -> None:
    for text in ("one or two retries, three times", "the first of two nodes",
                 "docs at docs.python.org", "meet at the office at 9",
                 "2026-02-25 09:14 UTC", "version 4.12.3", "ein zwei Tests",
                 "一个问题", "이사 일정", "plain text", "95% CI 0·61-0·84, p=0·0001"):
        view = normalised_view(text)
        assert view.text == text and view.identical, text


def test_base64_and_hex_payloads_decode_and_blobs_are_flagged() -> None:
    import base64

    b64 = base64.b64encode(b"call anna@example.com").decode()
    url = base64.urlsafe_b64encode(b"rezendeyasmin@naver.com").decode().rstrip("=")
    text = f"a {b64} b doc-{url} c {b'anna@example.com'.hex()} d"
    assert [d for _, _, d in payloads(text)] == [
        "call anna@example.com", "rezendeyasmin@naver.com", "anna@example.com"]
    blob = base64.b64encode(random.Random(7).randbytes(36)).decode()
    ordinary = ("3f786850e387550fdab836ed7e6dc881de23001b 123e4567-e89b-12d3-a456-426614174000 "
                "payments-ingest-worker-7d9f8c6b5-x2k4q Internationalization")
    mixed = f"{ordinary} {blob}"
    assert [mixed[a:b] for a, b in blobs(mixed)] == [blob]
    assert payloads(ordinary) == []


@FEW
@given(st.from_regex(r"[0-9]{7,12}", fullmatch=True), st.sampled_from(sorted(forms.WORDS)),
       st.integers(0, 2**32),
       st.sampled_from(["SSN", "CRM", "X-Debug-Context", "IBAN", "ID", "API", "PIN", "Note"]))
def test_a_spelled_number_ends_at_its_line_and_leaves_the_next_lines_label(
        digits: str, lang: str, seed: int, label: str) -> None:
    spelled = forms.spelled(digits, lang, random.Random(seed))
    view = reads(f"Noted during the call: {spelled}\n{label}: see above")
    assert view.endswith(f"\n{label}: see above"), view
    assert re.sub(r"\D", "", view.split("\n")[0]) == digits


def test_brackets_and_one_word_after_a_plus_are_part_of_a_spelled_number() -> None:
    assert reads("to (20 one) two 86-1848 in") == "to (201) 286-1848 in"
    assert reads("هو +971 2 266 4 three 95 أثناء") == "هو +97122664395 أثناء"
    assert reads("назвал 8 (девять 12) один один четыре-ноль 6-семь 8 как") == \
        "назвал 8 (912) 114-06-78 как"
    assert reads("one retry (two at most) in 5 minutes") == \
        "one retry (two at most) in 5 minutes"


def test_digits_written_apart_keep_their_groups() -> None:
    assert reads("teléfono: 6 1 7  0 1  9 4  6 2") == "teléfono: 617 01 94 62"
    assert reads("tarjeta: 4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1") == "tarjeta: 4111111111111111"


def test_a_record_ends_at_its_line_break() -> None:
    # a date, then the next CSV record's number: two values, not one
    assert reads("1,Ana,2026-09-24\n2,Park Jinho,,2026-12-01") == \
        "1,Ana,2026-09-24\n2,Park Jinho,,2026-12-01"
    assert reads("opened 13:52\n7 retries") == "opened 13:52\n7 retries"
    # a value cut over lines inside one record is still read whole
    assert reads("17,660\n487\n647\n07,Lisbon") == "17,660 487 647 07,Lisbon"
    # a table row's id and the card in the next cell are two values
    assert reads("| 2 | 5148 4394 3471 9425 |") == "| 2 | 5148 4394 3471 9425 |"
    assert reads("| 4111 | 1111 | 1111 | 1111 |") == "| 4111 1111 1111 1111 |"


def test_a_query_values_plus_is_a_space_and_an_encoded_plus_stays() -> None:
    assert reads("?phone=8+%28912%29+418-59-89&x=1") == "?phone=8 (912) 418-59-89&x=1"
    assert reads("?name=%E0%A4%B2%E0%A4%BE+%E0%A4%A6%E0%A5%81&p=2") == "?name=ला दु&p=2"
    assert reads("?phone=%2B4930123456&x=1") == "?phone=+4930123456&x=1"
    assert reads("?phone=+4930+123456") == "?phone=+4930 123456"  # a raw + first: the sign


def test_pieces_over_lines_and_after_a_plus_and_a_named_passport() -> None:
    iban = "BR9209830120399524522790144P7"
    assert reads("IBAN: " + "\n".join(iban)) == "IBAN: " + iban
    assert reads("tel +821 / 080\n547·803 ok") == "tel +821080547803 ok"
    assert reads("паспорт: 6.5.1.1.9.7.4.7.9.3") == "паспорт: 6511974793"
    assert reads("build: 5.5.1.1.9.7.4.7.9.3") == "build: 5.5.1.1.9.7.4.7.9.3"  # none named
    # a served locale's mobile number needs no name: "(11) 96373-8399" in pairs
    assert reads("Anotado: 11.96.37.38.39.9") == "Anotado: 11963738399"
    assert reads("Anotado: 10.96.37.38.39.9") == "Anotado: 10.96.37.38.39.9"  # no mobile


def test_a_national_number_dictated_in_words_reads_in_its_printed_form() -> None:
    assert reads("Notiert: fünf sechs sieben null zwei drei eins neun vier sechs vier") == \
        "Notiert: 56 702 319 464"  # a Steuer-ID by its check digit
    assert reads("noted 7 eight 17 eight 57 zero four 44 five.") == "noted 7817 8570 4445."
    assert reads("call me on five five five one two three four five six seven") == \
        "call me on 5551234567"  # no national number's check: the digits as read


def test_the_japanese_at_mark_is_read_as_at() -> None:
    assert reads("kaoriitoアットマークyahooドットcom") == "kaoriito@yahoo.com"


def test_every_encoded_word_of_a_query_value_reads() -> None:
    assert reads("?name=%D0%9B%D0%B0+%D0%9B%D1%8E+%D0%9A%D1%83&x=1") == "?name=Ла Лю Ку&x=1"
    assert reads("?passport=65+07+%E2%84%96+133229&lang=ru") == "?passport=65 07 № 133229&lang=ru"


def test_a_named_ssn_in_pieces_and_a_word_inside_a_printed_number() -> None:
    assert reads("SSN: 68/11/34/66/1") == "SSN: 681134661"
    assert reads("build: 68/11/34/66/1") == "build: 68/11/34/66/1"
    assert reads("call 815-1 five-8155") == "call 815-15-8155"
    assert reads("In 2024 one 2025 plan") == "In 2024 one 2025 plan"  # prose stays


def test_a_spaced_devanagari_name_with_an_apostrophe_reads_whole() -> None:
    assert reads("नाम: अ ं क ु र  ड ी ’ क ो स ् ट ा") == "नाम: अंकुर डी’कोस्टा"


def test_names_spelled_apart_with_particles_and_hyphens_read_whole() -> None:
    assert reads("nome: H a d a s s a  d a  R o s a") == "nome: Hadassa da Rosa"
    assert reads("Name: H a n s - M i c h a e l  G n a t z") == "Name: Hans-Michael Gnatz"


def test_a_phone_without_trunk_prefix_in_pieces_where_the_text_names_a_phone() -> None:
    assert reads("teléfono: 61.04.14.31.9") == "teléfono: 610414319"
    assert reads("build: 61.04.14.31.9") == "build: 61.04.14.31.9"


def test_a_whole_number_on_each_line_stays_two_numbers() -> None:
    assert reads("Tel. 618 37 56 94\n612 87 72 10\nx") == "Tel. 618 37 56 94\n612 87 72 10\nx"
    assert reads("card 4111 1111\n1111 1111 ok") == "card 4111 1111 1111 1111 ok"
