"""Connection strings of clouds and databases, and letter-spaced tokens: the secret part is
a SECRET, what names the place around it is left readable."""

import random
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.redaction.recognizers import MailboxRecognizer, secret_recognizer
from shared.text.reader import normalised_view

SECRETS = secret_recognizer()
MAILBOXES = MailboxRecognizer()


def _secrets(text: str) -> list[str]:
    return [text[r.start:r.end] for r in SECRETS.analyze(text, ["SECRET"])]


def _key(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(n))


@given(st.integers(0, 10_000))
def test_azure_keys_and_signatures_are_masked_and_their_places_are_not(seed: int) -> None:
    rng = random.Random(seed)
    key, sig = _key(rng, 86) + "==", _key(rng, 43).replace("/", "%2F") + "%3D"
    texts = {
        key: f"DefaultEndpointsProtocol=https;AccountName=acct{seed};AccountKey={key};"
             "EndpointSuffix=core.windows.net",
        key[:44]: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
                  f"SharedAccessKey={key[:44]}",
        sig: "BlobEndpoint=https://x.blob.core.windows.net/;SharedAccessSignature=sv=2021-06-08"
             f"&ss=b&srt=sco&sp=rl&se=2026-01-01&sig={sig}",
    }
    for secret, text in texts.items():
        found = _secrets(text)
        assert any(secret in f for f in found), text
        assert not any("windows.net" in f or "AccountName" in f for f in found), found


@pytest.mark.parametrize(("url", "password"), [
    ("postgres://admin:hunter2pass@db.example.com:5432/prod", "hunter2pass"),
    ("mysql://root:S3cretPw@localhost/db", "S3cretPw"),
    ("mongodb+srv://user:S3cretPw@cluster0.mongodb.net/test", "S3cretPw"),
    ("redis://:S3cretPw@cache:6379/0", "S3cretPw"),
    ("amqp://guest:S3cretPw@rabbit:5672/", "S3cretPw"),
])
def test_url_passwords_are_secrets_not_mailboxes(url: str, password: str) -> None:
    found = _secrets(url)
    assert len(found) == 1 and found[0].endswith(password)
    assert "@" not in found[0] and "example.com" not in found[0]
    assert MAILBOXES.analyze(f"conn={url}", ["EMAIL_ADDRESS"]) == []


def test_a_mailbox_in_a_url_query_is_still_one() -> None:
    text = "https://example.com/search?email=anna@example.com"
    assert [text[r.start:r.end] for r in MAILBOXES.analyze(text, ["EMAIL_ADDRESS"])] \
        == ["anna@example.com"]


@given(st.integers(0, 10_000))
def test_letter_spaced_tokens_read_joined(seed: int) -> None:
    rng = random.Random(seed)
    prefix, n = rng.choice([("ghp_", 36), ("sk_live_", 24), ("xoxb-", 30), ("AKIA", 16)])
    token = prefix + "".join(rng.choice(string.ascii_uppercase + string.digits)
                             for _ in range(n))
    text = f"the token is {' '.join(token)} ok"
    assert _secrets(normalised_view(text).text) != []
    assert token in normalised_view(text).text


@pytest.mark.parametrize("text", [
    "The steps are a b c d e in prose.", "the F B I and the C I A were there",
    "Options: x y z w v and so on.",
])
def test_ordinary_spaced_letters_stay_as_written(text: str) -> None:
    assert normalised_view(text).text == text
