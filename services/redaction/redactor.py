"""Presidio analysis and anonymisation of whole documents, in batches.

Every string field a document carries (title, text, metadata values) is analysed; each
entity becomes a typed placeholder such as <EMAIL_ADDRESS>, or a keyed pseudonym such as
<EMAIL_ADDRESS:4f2a91c0> when a pseudonym key is set. Long texts are analysed in bounded,
overlapping windows whose findings are merged; secrets (which may be long, like a private
key block) are matched over the whole text, which costs one regex pass.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerResult
from presidio_anonymizer import AnonymizerEngine
from presidio_anonymizer.entities import OperatorConfig
from presidio_anonymizer.entities import RecognizerResult as AnonymizerSpan

from services.redaction.cards import CardRecognizer
from services.redaction.ibans import Mod97IbanRecognizer
from services.redaction.labels import ACL_ENTITIES, checked, refusal
from services.redaction.names import NameRecognizer
from services.redaction.national_ids import NationalIdRecognizer
from services.redaction.nlp import (
    BisectContextEnhancer,
    TrimmedSpacyNlpEngine,
)
from services.redaction.phones import PossiblePhoneRecognizer
from services.redaction.pseudonyms import pseudonym
from services.redaction.recognizers import (
    AddressRecognizer,
    MailboxRecognizer,
    secret_recognizer,
)
from services.redaction.settings import RedactionSettings
from services.redaction.spared import spared
from services.redaction.subjects import Masked, Redacted
from services.redaction.windows import merge, shifted, windows
from shared.contract.records import Document, RedactedDocument
from shared.errors import InvalidInput
from shared.text.encoded import blobs, payloads
from shared.text.reader import normalised_view
from shared.text.visible import View

WHOLE_TEXT = "SECRET"  # matched over the whole text, never cut by a window edge
# Below every recognizer's score: a blob that is a key too is typed SECRET.
ENCODED_SCORE = 0.45
# Presidio's debug logs quote the words around each finding: never let them reach a log,
# whatever level the service runs at.
for _name in ("presidio-analyzer", "presidio-anonymizer"):
    logging.getLogger(_name).setLevel(logging.WARNING)


def _mapped(view: View, results: list[RecognizerResult]) -> list[RecognizerResult]:
    """Findings on the view as findings on the text it was read from."""
    out = []
    for r in results:
        if r.end > r.start:
            start, end = view.span(r.start, r.end)
            out.append(RecognizerResult(r.entity_type, start, end, r.score,
                                        r.analysis_explanation, r.recognition_metadata))
    return out


@dataclass(frozen=True)
class Redaction:
    text: str
    counts: Counter[str]
    # What was masked, as a person reads it: for the subject index only, never logged.
    masked: tuple[Masked, ...] = field(default=(), repr=False)



# A run of punctuation this long holds no personal data, and spaCy's
# tokenizer peels it one suffix at a time, each search scanning the rest: quadratic
# (16 KiB of "!" took 33 s and starved the worker's heartbeats into an eviction).
_RUN = re.compile(r"[^\w\s]{32,}")


def break_runs(text: str) -> str:
    """`text` with every other character of each long punctuation run made a space: the
    same length, so every finding's span is the same in `text`."""
    return _RUN.sub(lambda m: "".join(c if k % 2 == 0 else " "
                                      for k, c in enumerate(m.group())), text)

class Redactor:
    def __init__(self, settings: RedactionSettings) -> None:
        self.settings = settings
        nlp = TrimmedSpacyNlpEngine(settings.nlp_components, settings.spacy_model)
        analyzer = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"],
                                  context_aware_enhancer=BisectContextEnhancer())
        # Presidio's own phone and card recognizers miss unassigned numbers and current
        # issuer ranges; ours find a superset of what they find.
        analyzer.registry.remove_recognizer("PhoneRecognizer")
        analyzer.registry.add_recognizer(PossiblePhoneRecognizer(
            list(settings.phone_regions), prefilter=settings.phone_prefilter))
        analyzer.registry.remove_recognizer("CreditCardRecognizer")
        analyzer.registry.add_recognizer(CardRecognizer())
        analyzer.registry.remove_recognizer("IbanRecognizer")
        analyzer.registry.add_recognizer(Mod97IbanRecognizer())
        analyzer.registry.remove_recognizer("EmailRecognizer")
        analyzer.registry.add_recognizer(MailboxRecognizer())
        analyzer.registry.remove_recognizer("IpRecognizer")
        analyzer.registry.add_recognizer(AddressRecognizer())
        analyzer.registry.add_recognizer(NationalIdRecognizer())
        self.names = NameRecognizer(settings.allow_list)
        self.names.load()  # the gazetteer (~1.7 s) at start-up, not in the first batch
        self.secrets = secret_recognizer()
        self.batch = BatchAnalyzerEngine(analyzer_engine=analyzer)
        self.anonymizer = AnonymizerEngine()
        self.windowed = [e for e in settings.entities if e not in (WHOLE_TEXT, "ENCODED")]
        key = settings.pseudonym_key
        self._key = key.get_secret_value().encode() if key is not None else None
        self.fingerprint = hashlib.sha256(json.dumps({
            "model": settings.spacy_model, "components": list(nlp.components),
            "entities": sorted(settings.entities), "threshold": settings.score_threshold,
            "regions": sorted(settings.phone_regions),
            "recognizers": sorted([r.name for r in analyzer.registry.recognizers]
                                  + [self.secrets.name]),
            "window": [settings.window_chars, settings.window_overlap_chars],
            "allow_list": sorted(settings.allow_list), "name_rules": settings.name_rules,
            "pseudonyms": self._key is not None,
        }).encode()).hexdigest()

    def analyze(self, texts: list[str]) -> list[list[RecognizerResult]]:
        """Non-overlapping findings per text, as spans of the original text.

        What is analysed is each text as a person reads it (shared.text.reader): a value
        hidden by invisible characters, look-alike letters or digits, spelled digits, odd
        separators, percent-encoding or table cells is found there, and its whole original
        span, hidden characters included, is masked. A token that decodes from base64 or
        hex to text is analysed decoded too, and masked whole when that text holds personal
        data; base64 that decodes to no text is masked as ENCODED (shared.text.encoded).
        """
        views = [normalised_view(t) for t in texts]
        decoded = [payloads(v.text) for v in views]
        inner = [d for found in decoded for _, _, d in found]
        found = self._analyze_views([v.text for v in views] + inner)
        in_payloads = iter(found[len(texts):])
        out = []
        for view, results, tokens in zip(views, found[:len(texts)], decoded, strict=True):
            results = [*results, *self._encoded(view.text, tokens, in_payloads)]
            out.append(merge(results if view.identical else _mapped(view, results)))
        return out

    def _encoded(self, text: str, tokens: list[tuple[int, int, str]],
                 in_payloads: Iterator[list[RecognizerResult]]) -> list[RecognizerResult]:
        """Each decoded token that holds personal data as one finding over the token, and
        the blobs that decode to nothing readable."""
        out = []
        for a, b, _ in tokens:
            hits = next(in_payloads)
            if hits:
                best = max(hits, key=lambda r: r.score)
                out.append(RecognizerResult(best.entity_type, a, b, best.score,
                                            best.analysis_explanation,
                                            best.recognition_metadata))
        if "ENCODED" in self.settings.entities:
            out += [RecognizerResult("ENCODED", a, b, ENCODED_SCORE) for a, b in blobs(text)]
        return out

    def _analyze_views(self, texts: list[str]) -> list[list[RecognizerResult]]:
        """Non-overlapping findings per text, windows analysed together in one batch."""
        cuts = [windows(t, self.settings.window_chars, self.settings.window_overlap_chars)
                for t in texts]
        found = iter(self._analyze_pieces(
            [t[a:b] for t, ws in zip(texts, cuts, strict=True) for a, b in ws]))
        out = []
        for text, ws in zip(texts, cuts, strict=True):
            results = [r for a, _ in ws for r in shifted(next(found), a)]
            if WHOLE_TEXT in self.settings.entities:
                results += [r for r in self.secrets.analyze(text, [WHOLE_TEXT])
                            if r.score >= self.settings.score_threshold]
            if self.settings.name_rules and "PERSON" in self.settings.entities:
                # Outside Presidio: its de-duplication would let a wider NER span (that is
                # then trimmed) swallow the name rules' exact one.
                results = self.names.resolve(text, results)
            out.append(merge(spared(text, results)))
        return out

    def _analyze_pieces(self, pieces: list[str]) -> list[list[RecognizerResult]]:
        if not self.windowed:
            return [[] for _ in pieces]
        return self.batch.analyze_iterator(
            [break_runs(p) for p in pieces], language="en", batch_size=16,
            entities=self.windowed,
            score_threshold=self.settings.score_threshold,
            allow_list=list(self.settings.allow_list) or None)

    def redact_texts(self, texts: list[str]) -> list[Redaction]:
        return [self._anonymize(t, r) for t, r in zip(texts, self.analyze(texts), strict=True)]

    def _operator(self, entity: str) -> OperatorConfig:
        if self._key is None:
            return OperatorConfig("replace", {"new_value": f"<{entity}>"})
        token = partial(pseudonym, self._key, entity, hex_chars=self.settings.pseudonym_hex_chars)
        return OperatorConfig("custom", {"lambda": token})

    def _anonymize(self, text: str, found: list[RecognizerResult]) -> Redaction:
        if not found:
            return Redaction(text, Counter())
        ops = {e: self._operator(e) for e in {r.entity_type for r in found}}
        # The anonymizer is typed for its own result class (it copies these four fields).
        spans = [AnonymizerSpan(r.entity_type, r.start, r.end, r.score) for r in found]
        out = self.anonymizer.anonymize(text=text, analyzer_results=spans, operators=ops)
        # The span's text read as a person reads it (hidden characters, look-alikes and
        # escapes undone), so the value keys as it would when typed.
        masked = tuple(Masked(r.entity_type, normalised_view(text[r.start:r.end]).text)
                       for r in found)
        return Redaction(out.text, Counter(item.entity_type for item in out.items), masked)

    def redact_isolated(self, docs: list[Document]) -> list[RedactedDocument | Exception]:
        """The batch in one pass; if that fails, each document alone, so a document that
        breaks the analyzer fails only itself (the agent dead-letters it). A document whose
        labels are refused comes back as its InvalidInput (pii_in_acl, bad_acl)."""
        return [r if isinstance(r, Exception) else r.doc for r in self.redact_found(docs)]

    def redact_found(self, docs: list[Document]) -> list[Redacted | Exception]:
        """As redact_isolated, each document with what was masked in it."""
        try:
            return self._checked(docs)
        except Exception:  # isolated below, where each failure is returned per document
            out: list[Redacted | Exception] = []
            for doc in docs:
                try:
                    out += self._checked([doc])
                except Exception as exc:  # returned, not swallowed: the caller dead-letters
                    out.append(exc)
            return out

    def redact_checked(self, docs: list[Document]) -> list[RedactedDocument | Exception]:
        """Labels checked first; the documents whose labels pass are redacted together."""
        return [r if isinstance(r, Exception) else r.doc for r in self._checked(docs)]

    def _checked(self, docs: list[Document]) -> list[Redacted | Exception]:
        refused = self.label_refusals(docs)
        done = iter(self.redacted([d for d, r in zip(docs, refused, strict=True)
                                   if r is None]))
        return [next(done) if r is None else r for r in refused]

    def label_refusals(self, docs: list[Document]) -> list[InvalidInput | None]:
        """Per document: why its labels are refused, or None. All labels of the batch are
        analysed in one pass; only ACL_ENTITIES count (a principal's name is no leak)."""
        views: list[list[str] | InvalidInput] = []
        for doc in docs:
            try:
                views.append(checked(doc))
            except InvalidInput as exc:
                views.append(exc)
        texts = [t for v in views if not isinstance(v, InvalidInput) for t in v]
        found = iter(self.analyze(texts) if texts else [])
        out: list[InvalidInput | None] = []
        for v in views:
            if isinstance(v, InvalidInput):
                out.append(v)
                continue
            kinds = [r.entity_type for _ in v for r in next(found)
                     if r.entity_type in ACL_ENTITIES]
            out.append(refusal(kinds) if kinds else None)
        return out

    def redact_documents(self, docs: list[Document]) -> list[RedactedDocument]:
        """Redact every string field of every document in one analyzer batch."""
        return [r.doc for r in self.redacted(docs)]

    def redacted(self, docs: list[Document]) -> list[Redacted]:
        """As redact_documents, each document with what was masked in any of its fields."""
        fields: list[str] = []
        for doc in docs:
            fields += [doc.title, doc.text, *doc.metadata.values()]
        done = iter(self.redact_texts(fields))
        out = []
        for doc in docs:
            title, text = next(done), next(done)
            meta = {k: next(done) for k in doc.metadata}
            counts = title.counts + text.counts + sum((m.counts for m in meta.values()), Counter())
            redacted = RedactedDocument(
                **doc.model_dump(exclude={"title", "text", "metadata"}),
                title=title.text, text=text.text,
                metadata={k: m.text for k, m in meta.items()}, entity_counts=dict(counts))
            masked = title.masked + text.masked + tuple(x for m in meta.values()
                                                        for x in m.masked)
            out.append(Redacted(redacted, masked))
        return out
