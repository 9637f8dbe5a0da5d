"""An answer as both answer paths return it: text deltas, why it ended, token counts."""

from __future__ import annotations

from dataclasses import dataclass

from services.inference.answer.citations import CitationCheck
from services.inference.answer.extractive import ANSWER_MODE


@dataclass(frozen=True)
class Answer:
    pieces: tuple[str, ...]  # text deltas; joined, the answer
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    answer_ms: float
    mode: str = ANSWER_MODE
    unit: str = "words"
    # Generative: the 1-based numbers of the citations the model was shown (its prompt's
    # passages); None for an extractive answer, which shows nothing and quotes.
    shown: tuple[int, ...] | None = None
    # Which chunks the answer cites and how well they ground it (answer/citations.py), set
    # by the engine once the answer is whole.
    citations: CitationCheck | None = None
    # Why this answer replaced the one the chosen mode wrote ("" when it did not): a
    # generated answer below generation_min_support is replaced by the extractive one.
    replaced: str = ""

    @property
    def text(self) -> str:
        return "".join(self.pieces)
