"""National numbers of the served locales by check digits, printed shape and cues, and the
provider key formats the secret recognizer knows; numbers without any of these stay."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.redaction.recognizers import secret_recognizer
from shared.text.checksums import (
    aadhaar_ok,
    cnpj_ok,
    cpf_ok,
    korean_rrn_ok,
    prc_resident_id_ok,
    steuer_id_ok,
)
from shared.text.national_ids import national_ids
from tests.unit.redaction import pii_forms as forms

CHECKS = {"BR_CPF": cpf_ok, "BR_CNPJ": cnpj_ok, "IN_AADHAAR": aadhaar_ok,
          "CN_RESIDENT_ID": prc_resident_id_ok, "KR_RRN": korean_rrn_ok,
          "DE_TAX_ID": steuer_id_ok}


def found(text: str) -> list[tuple[str, str]]:
    return [(text[a:b], e) for a, b, e in national_ids(text)]


def test_published_examples_pass_their_checks() -> None:
    assert cpf_ok("52998224725") and not cpf_ok("52998224726") and not cpf_ok("11111111111")
    assert cnpj_ok("11222333000181") and not cnpj_ok("11222333000182")
    assert aadhaar_ok("499118665246") and not aadhaar_ok("499118665247")
    assert prc_resident_id_ok("11010519491231002X") and not prc_resident_id_ok(
        "110105194912310021")
    assert steuer_id_ok("86095742719") and not steuer_id_ok("86095742718")
    assert korean_rrn_ok("9104111777631", checksum=False)
    assert not korean_rrn_ok("9113111777631", checksum=False)  # no 31 November... month 13


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(CHECKS)), st.integers(0, 2**32))
def test_generated_numbers_pass_and_one_changed_digit_fails(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    value = forms.MAKERS[kind](rng)
    assert CHECKS[kind](value), value
    if kind == "KR_RRN":
        return  # the check digit alone is not what makes an RRN (numbers since 2020)
    i = rng.randrange(len(value) - 1)
    changed = value[:i] + str((int(value[i]) + rng.randint(1, 9)) % 10) + value[i + 1:]
    if kind == "DE_TAX_ID" and changed[0] == "0":
        return
    # Mod 11 folds two remainders into one check digit (10 -> 0 in a CPF, 0 and 1 -> 0 in
    # a CNPJ): a change is caught unless the changed body's own check digits are those
    # written.
    of = {"BR_CPF": (forms.cpf_of, 9), "BR_CNPJ": (forms.cnpj_of, 12)}.get(kind)
    if of is not None and i < of[1]:
        assert CHECKS[kind](changed) == (of[0](changed[:of[1]]) == changed), changed
        return
    assert not CHECKS[kind](changed) or changed == value, (value, changed)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(forms.MAKERS.keys() - {"CREDIT_CARD"})), st.integers(0, 2**32),
       st.sampled_from(["json", "csv", "table", "label"]))
def test_each_number_is_found_where_systems_write_it(kind: str, seed: int, where: str) -> None:
    rng = random.Random(seed)
    value = forms.MAKERS[kind](rng)
    key = {"BR_CPF": "cpf", "BR_CNPJ": "cnpj", "IN_AADHAAR": "aadhaar", "CN_RESIDENT_ID":
           "id", "KR_RRN": "rrn", "DE_TAX_ID": "steuer_id", "RU_PASSPORT": "passport"}[kind]
    text = {"json": f'{{"{key}": "{value}", "city": "Recife"}}',
            "csv": f"name_hash,{key},since\nab12,{value},2026-02-25\n",
            "table": f"| ticket | {key} |\n|---|---|\n| T-7 | {value} |",
            "label": f"{forms.LABELS[kind]}: {forms.printed(kind, value)}"}[where]
    assert any(e == kind for _, e in found(text)), text


def test_numbers_without_a_check_a_shape_or_a_cue_stay() -> None:
    for text in ("order 52998224725 shipped", "ids 11222333000181 and 499118665246",
                 "counter 86095742719", "build 4508123456", "ts 1735689600123",
                 "range 20260225-1234567", "serial 4991 1866 5247"):
        assert found(text) == [], text


def test_a_label_names_the_number_even_when_its_check_fails() -> None:
    # A system that wrote an invalid number next to its name still wrote someone's id.
    assert found("Aadhaar: 4991 1866 5247") == [("4991 1866 5247", "IN_AADHAAR")]
    assert found('{"cpf": "52998224726"}') == [("52998224726", "BR_CPF")]


@pytest.mark.parametrize(("secret", "name"), [
    ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "google_api_key"),
    ("glpat-Xy9zAb3dEf6gHi9jKl2m", "gitlab_token"),
    ("ghp_" + "a1B2" * 9, "github_token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_fine_grained"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack_token"),
    ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "slack_webhook"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
    ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "stripe_webhook_secret"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "key_pair"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE "
     "KEY-----", "private_key"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "private_key"),
    ("npm_" + "a1B2c3D4e5" * 3 + "f6G7h8", "npm_token"),
    ("SG." + "a" * 22 + "." + "b" * 43, "sendgrid_key"),
])
def test_provider_keys_are_secrets_whole(secret: str, name: str) -> None:
    text = f"the CI log printed {secret} in clear"
    results = secret_recognizer().analyze(text, ["SECRET"])
    start = text.index(secret)
    assert any(r.start <= start and start + len(secret) <= r.end for r in results), name


def test_ordinary_config_is_no_secret() -> None:
    text = ("token_ttl: 3600\nsecret_name_prefix is payments\nskip-tests: true\n"
            "sk-8 is a shelf code\nghp_short\nAIza is a prefix\nxox is a word")
    assert secret_recognizer().analyze(text, ["SECRET"]) == []
