"""An answer as both answer paths return it: text deltas, why it ended, token counts."""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def text(self) -> str:
        return "".join(self.pieces)
