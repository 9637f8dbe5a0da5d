"""The generative answer's text rules: prompt packing and stop sequences.

Pure: token counting is passed in, so the rules test without a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

INSTRUCTION = ("Answer the question using only the numbered passages below, in one or two "
               "short sentences. Cite the passage you used in brackets, like [1]. Copy "
               "placeholders such as <PERSON> exactly as written. If the passages do not "
               "answer it, say so.")
Render = Callable[[str, str], str]  # (instruction, user turn) -> the model's prompt text


def plain(instruction: str, user: str) -> str:
    """The prompt of a model without a chat template."""
    return f"{instruction}\n\n{user}\nAnswer:"


def pack_prompt(question: str, texts: Sequence[str], count_tokens: Callable[[str], int],
                budget: int, render: Render = plain) -> tuple[str, tuple[int, ...]]:
    """The prompt and the 1-based source numbers packed into it.

    Sources go in relevance order (the order given); one that does not fit is left out
    and smaller ones after it may still go in. Numbers stay those of the citation list,
    so "[n]" in the answer always means citations[n-1]. `render` wraps the instruction
    and the user turn the way the model was trained (its chat template).
    """
    tail = f"Question: {' '.join(question.split())}"
    used = count_tokens(render(INSTRUCTION, "Passages:\n\n" + tail))
    lines: list[str] = []
    packed: list[int] = []
    for number, text in enumerate(texts, start=1):
        line = f"[{number}] {' '.join(text.split())}\n"
        cost = count_tokens(line)
        if used + cost > budget:
            continue
        used += cost
        lines.append(line)
        packed.append(number)
    return render(INSTRUCTION, "Passages:\n" + "".join(lines) + "\n" + tail), tuple(packed)


class StopScanner:
    """Cuts streamed text at the first stop sequence, never emitting any part of one.

    Text that could be the start of a stop sequence is held back until the next delta
    shows whether it is one.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        """The part of `held + delta` that is safe to emit now."""
        if self.stopped:
            return ""
        text = self._held + delta
        hits = [at for at in (text.find(s) for s in self.stops) if at >= 0]
        if hits:
            self.stopped, self._held = True, ""
            return text[: min(hits)]
        keep = max((n for s in self.stops for n in range(1, len(s))
                    if text.endswith(s[:n])), default=0)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """At the end of generation the held text was no stop sequence after all."""
        held, self._held = self._held, ""
        return "" if self.stopped else held
