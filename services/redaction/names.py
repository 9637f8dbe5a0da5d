"""Person names the small NER model misses, and technology words it takes for people.

Measured on Faker-generated tickets (scripts/bench_redaction), en_core_web_sm alone found
about 80% of person names and a fifth of its PERSON findings were words like Kafka,
Grafana or "Cheers". Three rules close most of that gap without a bigger model:
- a given-names gazetteer (gender-guesser's list of about 60,000 first names from many
  countries): a known first name and the capitalised words after it are a person;
- where names stand alone: after a greeting ("Hi Anna,"), on the line after a closing
  ("Best regards,\nAnna Weber"), after an honorific ("Dr. Weber");
- a PERSON finding made only of technology or product words (tech_terms.txt plus
  the allow list in settings), or holding a digit, is dropped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache
from importlib import resources

from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.recognizers import finding

_UP = r"[^\W\d_a-zß-ÿ]"  # an upper-case letter (any script with case)
WORD = rf"{_UP}[\w'’]*(?:-{_UP}[\w'’]*)*"
PARTICLES = (r"(?:van|von|de|del|della|der|den|di|da|du|le|la|ter|ten|bin|al|dos|das|y|en|"
             r"op|het|'t|zu|af|av)")
# A capitalised word then up to three more (particles allowed between them).
_SEQUENCE = re.compile(
    rf"(?<![\w@.])({WORD})((?:[ \t]+(?:{PARTICLES}[ \t]+){{0,3}}{WORD}){{0,3}})")
_GREETING = re.compile(
    rf"(?m)^[ \t]*(?i:hi|hello|hey|dear|good (?:morning|afternoon|evening)|greetings)"
    rf"[ \t,]+({WORD}(?:[ \t]+{WORD}){{0,2}})[ \t]*[,!:]")
_CLOSING = re.compile(
    rf"(?m)^[ \t]*(?i:thanks|thank you|many thanks|cheers|best|best regards|kind regards|"
    rf"warm regards|regards|sincerely|yours|br|greetings)[ \t]*[,!.]?[ \t]*\n[ \t]*"
    rf"({WORD}(?:[ \t]+(?:{PARTICLES}[ \t]+)?{WORD}){{0,2}})[ \t]*$")
_HONORIFIC = re.compile(
    rf"\b(?:Mr|Mrs|Ms|Mx|Miss|Dr|Prof|Sir|Madam|Herr|Frau|Mme|Mlle|M)\.?[ \t]+"
    rf"({WORD}(?:[ \t]+{WORD}){{0,2}})")
SCORE = 0.6


def fold(word: str) -> str:
    """Lower case without accents: the gazetteer's spelling."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower())
                   if not unicodedata.combining(c))


@cache
def given_names() -> frozenset[str]:
    import gender_guesser.detector as gg  # ~1.7 s to load; once per process, at start
    return frozenset(fold(n) for n in gg.Detector(case_sensitive=False).names)


@cache
def tech_terms() -> frozenset[str]:
    text = resources.files("services.redaction").joinpath("tech_terms.txt").read_text()
    return frozenset(fold(w) for w in text.split() if not w.startswith("#"))


_PARTICLE_WORD = re.compile(rf"^{PARTICLES}$", re.I)


def written_as_name(span: str) -> bool:
    """Every word capitalised (particles aside) and no word that names are never written
    as: a lower-case start (siRNA, statin, "S. cerevisiae"), brackets, or one all-caps
    word of five letters or more (CRISPR; short ones like UK stay, they may be places)."""
    words = span.split()
    if any(c in span for c in "()[]{}<>=/\\"):
        return False
    if len(words) == 1 and words[0].isupper() and len(words[0]) >= 5:
        return False
    return all(w[0].isupper() or _PARTICLE_WORD.match(w) for w in words if w[0].isalpha())


def _in_heading(text: str, pos: int) -> bool:
    """Whether `pos` lies on a Title Case line (six or more words, 80% capitalised): a
    heading, where capitals say nothing about names. Ticket titles are shorter and carry
    lower-case words ("Escalation from Anna Weber")."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    words = [w for w in text[start:end if end >= 0 else len(text)].split() if w[0].isalpha()]
    return len(words) >= 6 and sum(w[0].isupper() for w in words) >= 0.8 * len(words)


@cache
def stop_words() -> frozenset[str]:
    """English function words some given-name lists also hold ("The", "An", "Will")."""
    from spacy.lang.en.stop_words import STOP_WORDS
    # Weekdays, and months that are not also given names (April, May, June ... are).
    calendar = ("january february march july september october november december monday "
                "tuesday wednesday thursday friday saturday sunday")
    return frozenset(fold(w) for w in (*STOP_WORDS, *calendar.split()))


def _is_given_name(word: str) -> bool:
    names = given_names()
    if word.isupper() or fold(word) in stop_words():  # acronyms (CI, HR) and function words
        return False
    return fold(word) in names or all(fold(p) in names for p in word.split("-"))


class NameRecognizer(LocalRecognizer):
    """PERSON from a given-names gazetteer, greetings, signatures and honorifics."""

    def __init__(self, allow_list: Iterable[str] = ()) -> None:
        super().__init__(supported_entities=["PERSON"], supported_language="en",
                         name="NameRecognizer")
        self.allowed = tech_terms() | {fold(w) for w in allow_list}

    def load(self) -> None:
        given_names()

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        spans: dict[tuple[int, int], str] = {}
        for m in _SEQUENCE.finditer(text):
            # The first known given name in a run of capitalised words starts a name
            # ("Customer Anna Weber") when a capitalised word follows it; every one after
            # it belongs to it (a surname may well be "Faust" or "Spark"). A given name
            # alone ("April", "Candida", "Forest") is a name only where the rules below say.
            if _in_heading(text, m.start()):
                continue  # "Gene Content Of Ion Channels": every word is capitalised
            words = list(re.finditer(r"\S+", m.group(0)))
            for w in words[:-1]:
                word = w.group()
                if (word[0].isupper() and fold(word) not in self.allowed
                        and _is_given_name(word)):
                    spans.setdefault((m.start() + w.start(), m.end()), "known given name")
                    break
        for rule, why in ((_GREETING, "greeting"), (_CLOSING, "signature"),
                          (_HONORIFIC, "honorific")):
            for m in rule.finditer(text):
                if not self.only_allowed(m.group(1)):
                    spans.setdefault((m.start(1), m.end(1)), why)
        return [finding(self, "PERSON", a, b, SCORE, why)
                for (a, b), why in sorted(spans.items())]

    def refine(self, text: str, r: RecognizerResult) -> list[RecognizerResult]:
        """Another recognizer's finding, with NER's PERSON and LOCATION spans trimmed to
        what can be a name: one line at a time, lines dropped that hold digits, only
        technology words, or words no name is written as (NER reads "Tom Lloyd\n+44 161
        496 0932", "Kafka Connect", "siRNA", "mTOR" or "S. cerevisiae" as people)."""
        if r.entity_type not in ("PERSON", "LOCATION"):
            return [r]
        out = []
        pos = r.start
        for line in text[r.start:r.end].split("\n"):
            stripped = line.strip(" \t,;:")
            if stripped and not self.only_allowed(stripped) and written_as_name(stripped):
                a = pos + line.index(stripped)
                out.append(RecognizerResult(r.entity_type, a, a + len(stripped), r.score,
                                            r.analysis_explanation, r.recognition_metadata))
            pos += len(line) + 1
        return out

    def only_allowed(self, span: str) -> bool:
        """Not a person: a span made only of allowed (technology) words, one holding a
        digit, or a lone acronym ("CI", "SRE")."""
        words = re.findall(r"[\w'’-]+", span)
        acronym = len(words) == 1 and words[0].isupper() and len(words[0]) <= 4
        return (acronym or any(c.isdigit() for c in span)
                or all(fold(w) in self.allowed for w in words))
