"""Where a value's kind is named after it or on its line, and values on neighbouring lines:
a phone named after the number ("... как номер телефона"), digit groups cut by odd marks
where the line names a phone or the text names an id, two phones on two lines, several
people signing, Latin names in Chinese sentences, Arabic family names in brackets.

Numbers come from python-phonenumbers' example numbers and hypothesis-drawn digits, names
from Faker with drawn seeds: none of them tuned on."""

from __future__ import annotations

import random
import re

import phonenumbers
import pytest
from faker import Faker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from shared.text.checksums import cpf_ok, steuer_id_ok

SLOW = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
# A phone named after it, in the served languages.
NAMED_AFTER = ["The customer gave {v} as their phone number on the call.",
               "Клиент назвал {v} как номер телефона во время звонка.",
               "El cliente dio {v} como teléfono en la llamada.",
               "O cliente informou {v} como telefone na ligação."]


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def national(region: str, kind: phonenumbers.PhoneNumberType, rng: random.Random) -> str:
    """A valid national number of `region` (its example with the last digits redrawn
    until valid), digits only."""
    example = phonenumbers.example_number_for_type(region, kind)
    assert example is not None
    digits = phonenumbers.national_significant_number(example)
    for _ in range(200):
        tail = "".join(rng.choice("0123456789") for _ in range(3))
        candidate = digits[:-3] + tail
        if phonenumbers.is_valid_number(phonenumbers.parse(candidate, region)):
            return candidate
    return digits


@SLOW
@given(st.sampled_from(["US", "ES", "BR", "IN", "RU"]), st.integers(0, 2**32),
       st.sampled_from(NAMED_AFTER), st.sampled_from([".", "·", " - ", "/"]),
       st.integers(3, 4))
def test_a_phone_named_after_it_is_masked_in_odd_groups(
        redactor: Redactor, region: str, seed: int, template: str, mark: str,
        size: int) -> None:
    rng = random.Random(seed)
    digits = national(region, phonenumbers.PhoneNumberType.MOBILE, rng)
    if region == "RU":
        digits = "8" + digits  # Russia's trunk prefix
    written = mark.join(digits[i:i + size] for i in range(0, len(digits), size))
    [out] = redactor.redact_texts([template.format(v=written)])
    # The whole value masked, nothing else touched. An 11-digit number in a CPF's printed
    # layout (3.3.3-2 digits) with a valid CPF check is a CPF as much as a phone (1 such
    # number in 100): either label hides it.
    labels = ["<PHONE_NUMBER>"]
    if len(digits) == 11 and mark == "." and size == 3 and cpf_ok(digits):
        labels.append("<BR_CPF>")
    assert out.text in [template.format(v=label) for label in labels], (written, out.text)


@SLOW
@given(st.sampled_from(["FR", "DE", "GB", "ES"]), st.integers(0, 2**32))
def test_two_phones_on_two_lines_of_a_signature_are_both_masked(
        redactor: Redactor, region: str, seed: int) -> None:
    rng = random.Random(seed)
    fmt = phonenumbers.PhoneNumberFormat.NATIONAL
    phones = [phonenumbers.format_number(phonenumbers.parse(national(region, kind, rng),
                                                            region), fmt)
              for kind in (phonenumbers.PhoneNumberType.MOBILE,
                           phonenumbers.PhoneNumberType.FIXED_LINE)]
    text = f"Best regards,\nJulie Moulin\nTel. {phones[0]}\n{phones[1]}"
    [out] = redactor.redact_texts([text])
    assert out.text.count("<PHONE_NUMBER>") == 2, (phones, out.text)


@SLOW
@given(st.integers(0, 2**32), st.integers(2, 4))
def test_every_person_signing_on_a_line_of_their_own_is_masked(
        redactor: Redactor, seed: int, people: int) -> None:
    fake = Faker(["en_US", "de_DE", "ko_KR", "ru_RU"][seed % 4])
    fake.seed_instance(seed)
    names = [f"{fake.first_name()} {fake.last_name()}" for _ in range(people)]
    if fake.locales[0] in ("ko_KR", "ru_RU"):  # written in Latin letters in the e-mail
        fake = Faker("en_US")
        fake.seed_instance(seed)
        names = [f"{fake.first_name()} {fake.last_name()}" for _ in range(people)]
    [out] = redactor.redact_texts(["Thanks for the quick fix.\n\nBest regards,\n"
                                   + "\n".join(names)])
    assert not any(n in out.text for n in names), out.text
    # each line masked whole (NER may call a name a place: the type is not the property)
    assert all(re.fullmatch(r"<[A-Z_]+>", line) for line in out.text.splitlines()[-people:]), \
        out.text


def test_a_title_on_the_line_after_the_signature_stays() -> None:
    redactor = Redactor(RedactionSettings())
    [out] = redactor.redact_texts(["Best regards,\nJulie Moulin\nSite Reliability\n"])
    assert out.text == "Best regards,\n<PERSON>\nSite Reliability\n"


@pytest.mark.parametrize(("text", "kept"), [
    ("该工单由He Jie于周一创建。", "该工单由<PERSON>于周一创建。"),
    ("已升级给Li Na，等待回复。", "已升级给<PERSON>，等待回复。"),
    ("这个版本由Kafka Connect于周一部署。", "这个版本由Kafka Connect于周一部署。"),
    ("تم التصعيد إلى روفيدا عجرمة (العجارمة)؛ بانتظار الرد.",
     "تم التصعيد إلى <PERSON>؛ بانتظار الرد."),
    ("已升级给欧阳小红，等待回复。", "已升级给<PERSON>，等待回复。"),
    ("このチケットは月曜日に高橋くみ子さんが起票しました。",
     "このチケットは月曜日に<PERSON>さんが起票しました。"),
    ("id,name,card\n1,이영일,4298 0242 9206 2067", "id,name,card\n1,<PERSON>,<CREDIT_CARD>"),
])
def test_names_by_where_they_stand(redactor: Redactor, text: str, kept: str) -> None:
    [out] = redactor.redact_texts([text])
    assert out.text == kept


@SLOW
@given(st.integers(10**10, 10**11 - 1), st.sampled_from(["\n", ".", " "]))
def test_a_named_id_cut_into_three_or_four_groups_is_masked(
        redactor: Redactor, number: int, mark: str) -> None:
    digits = str(number)
    cuts = [digits[:3], digits[3:6], digits[6:9], digits[9:]]
    written = mark.join(cuts)
    [out] = redactor.redact_texts([f"Steuer-ID: {written}\nDanke."])
    if steuer_id_ok(digits):
        assert out.text == "Steuer-ID: <DE_TAX_ID>\nDanke.", (written, out.text)
    else:  # a label names it: masked as the labelled kind or left; never half masked
        assert cuts[0] not in out.text or written in out.text, out.text


def test_a_layout_is_a_national_number_only_with_its_check() -> None:
    from shared.text.national_ids import printed
    assert printed("529.982.247-25")  # a CPF that passes
    assert not printed("080.962.998.48")  # a CPF's layout, not its check: an Indian phone
