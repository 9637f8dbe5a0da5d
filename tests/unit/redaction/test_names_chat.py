"""Names in chat transcripts, e-mail headers and signatures, and found again alone.

The given names here are made up, so no gazetteer knows them: only where they stand
(a speaker label, a From line, a signature) says they are names.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scripts.benchlib.pii_generated import TUNE_SEEDS, conversations
from services.redaction.names import NameRecognizer, common_word, given_names
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings

NAMES = NameRecognizer()


def masked(text: str) -> str:
    """`text` with every PERSON span the rules find (and find again) replaced."""
    spans = sorted(((r.start, r.end) for r in NAMES.resolve(text, [])),
                   key=lambda s: (s[0], -s[1]))
    out, pos = [], 0
    for a, b in spans:
        if a >= pos:
            out += [text[pos:a], "<PERSON>"]
            pos = b
    return "".join(out) + text[pos:]


CHAT = ("[09:15] Zorvanta Kepuli: the payments deploy failed again\n"
        "[09:16] Mbekezi Thandolwe: looking now, p99 is at 2.3 s\n"
        "[09:18] Zorvanta Kepuli: rolling back; Thandolwe can you check Redis?\n"
        "[09:21] Mbekezi Thandolwe: done, thanks zorvanta\n")


def test_speaker_labels_with_unknown_given_names_and_lone_surnames() -> None:
    assert "zorvanta" not in given_names() and "mbekezi" not in given_names()
    out = masked(CHAT)
    for word in ("Zorvanta", "zorvanta", "Kepuli", "Mbekezi", "Thandolwe"):
        assert word not in out, out
    assert out.startswith("[09:15] <PERSON>: the payments deploy failed again\n"), out


@pytest.mark.parametrize("lines", [
    ["09:15 Zorvanta Kepuli: deploy failed", "09:16 Mbekezi Thandolwe: on it"],
    ["[2026-01-02 09:15:03] Zorvanta Kepuli: deploy failed",
     "[2026-01-02 09:15:40] Mbekezi Thandolwe: on it"],
    ["<Zorvanta> deploy failed", "<mbekezi> on it"],
    ["12/01/2026, 09:15 - Zorvanta Kepuli: deploy failed",
     "12/01/2026, 09:16 - Mbekezi Thandolwe: on it"],
    ["Zorvanta: deploy failed", "Mbekezi: on it", "Zorvanta: rolling back"],
])
def test_every_stamp_and_label_form(lines: list[str]) -> None:
    out = masked("\n".join(lines))
    for word in ("Zorvanta", "Kepuli", "Mbekezi", "mbekezi", "Thandolwe"):
        assert word not in out, out


def test_email_headers_signatures_and_later_mentions() -> None:
    text = ("From: Zorvanta Kepuli <zk@example.in>\n"
            'To: "Thandolwe, Mbekezi" <mt@example.in>, Ilvaro Quenzi <iq@example.in>\n'
            "Subject: rollback\n\nThe fix is on staging; Quenzi will verify it.\n\n"
            "--\nZorvanta Kepuli\nSite Reliability\n")
    out = masked(text)
    for word in ("Zorvanta", "Kepuli", "Mbekezi", "Thandolwe", "Ilvaro", "Quenzi"):
        assert word not in out, out
    assert "Site Reliability" in out and "Subject: rollback" in out


@pytest.mark.parametrize(("text", "expected"), [
    ("감사합니다.\nHayun Nam\nYeongsug Go\n☎ 010", "감사합니다.\n<PERSON>\n<PERSON>\n☎ 010"),
    ("Best regards,\nZorvanta Kepuli\nMbekezi Thandolwe",
     "Best regards,\n<PERSON>\n<PERSON>"),
    # a title or a team on the next line is not a name
    ("Best regards,\nZorvanta Kepuli\nSupport Engineer",
     "Best regards,\n<PERSON>\nSupport Engineer"),
    ("--\nZorvanta Kepuli\nSite Reliability", "--\n<PERSON>\nSite Reliability"),
    ("Thanks,\nZorvanta Kepuli\nPlatform Team", "Thanks,\n<PERSON>\nPlatform Team"),
    ("以上\nHayun Nam", "以上\n<PERSON>"),
])
def test_a_signature_of_two_names_and_a_closing_in_any_served_language(
        text: str, expected: str) -> None:
    assert masked(text) == expected


def test_a_closing_and_a_name_on_one_line() -> None:
    out = masked("The deploy is done.\nThanks, Zorvanta")
    assert out == "The deploy is done.\nThanks, <PERSON>"


TECHNICAL = (
    # a form: labels that do not repeat, and ones that do but are field words
    "Note: the export job retries three times.\nError: TLS handshake timeout.\n"
    "Root Cause: a stale DNS entry.\nImpact: checkout latency above 2 s.\n"
    "Note: restart the sidecar.\nStatus: Resolved\n",
    # a log with time stamps and component names
    "[09:15:03] Scheduler: job started\n[09:15:04] ERROR: connection refused\n"
    "[09:15:05] Kafka: group rebalanced\n[09:15:09] Scheduler: job finished\n",
    "2026-01-02 09:15:03 Worker: started\n2026-01-02 09:15:04 Worker: Postgres replica lag",
    # role labels of a support chat
    "Agent: how can I help?\nCustomer: my card was charged twice\nAgent: refund issued\n",
    "<div> pricing table\n<code> kubectl rollout restart\n<em> important\n",
    "Q: Why did checkout fail?\nA: The Redis failover took 40 s.\nQ: Fixed?\nA: Yes.\n",
    "From: the monitoring system\nTo: on-call\nSubject: disk usage above 90%\n",
)


@pytest.mark.parametrize("text", TECHNICAL)
def test_labelled_technical_text_keeps_every_word(text: str) -> None:
    assert masked(text) == text


SYLLABLES = ("ka", "zu", "mbe", "ri", "tho", "lan", "qui", "vo", "sha", "ne", "dro", "ye",
             "tsi", "gu", "wa", "pel", "xo", "bri")
invented = st.lists(st.sampled_from(SYLLABLES), min_size=3, max_size=4).map(
    lambda s: "".join(s).capitalize())
stamps = st.sampled_from(["[{h}:{m}] ", "{h}:{m} ", "[2026-03-04 {h}:{m}:07] ", ""])


@settings(max_examples=150, deadline=None)
@given(invented, invented, invented, invented, stamps, st.integers(0, 2))
def test_any_speaker_of_a_chat_is_masked_wherever_named(
        g1: str, s1: str, g2: str, s2: str, stamp: str, mention: int) -> None:
    names = (g1, s1, g2, s2)
    assume(len(set(names)) == 4 and not any(common_word(n) for n in names))
    later = (f"{s1} is checking it", f"ask {g1} about it", f"thanks {g1.lower()}")[mention]
    lines = [(g1, s1, "the deploy failed"), (g2, s2, "looking now"), (g1, s1, later),
             (g2, s2, "done")]
    text = "\n".join(stamp.format(h=9, m=10 + k) + f"{g} {s}: {msg}"
                     for k, (g, s, msg) in enumerate(lines))
    out = masked(text)
    for name in names:
        assert name.lower() not in out.lower(), out
    assert "the deploy failed" in out and "looking now" in out


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


@pytest.mark.parametrize("locale", ["en_IN", "zu_ZA"])
def test_conversations_of_a_tuning_seed_are_masked(redactor: Redactor, locale: str) -> None:
    """en_IN's given names are in the gazetteer, zu_ZA's are not (the rules alone)."""
    docs = conversations(locale, TUNE_SEEDS[0], 25)
    total = whole = 0
    for doc, found in zip(docs, redactor.analyze([d.text for d in docs]), strict=True):
        cover = {i for r in found for i in range(r.start, r.end)}
        for s in doc.spans:
            if s.entity == "PERSON":
                total += 1
                whole += all(i in cover for i in range(s.start, s.end))
    assert total > 150 and whole / total >= 0.93, (whole, total)
