"""Prompt packing and stop sequences over streamed text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.answer.generative.prompt import INSTRUCTION, StopScanner, pack_prompt


def words(text: str) -> int:
    return len(text.split())


def test_pack_keeps_relevance_order_and_skips_what_does_not_fit() -> None:
    texts = ["alpha " * 5, "beta " * 50, "gamma " * 5]
    base = words(pack_prompt("why?", [], words, 10_000)[0])
    prompt, packed = pack_prompt("why?", texts, words, base + 14)
    assert packed == (1, 3)  # the long second source is left out; the third still fits
    assert prompt.index("[1] alpha") < prompt.index("[3] gamma")
    assert "beta" not in prompt and prompt.endswith("Question: why?\nAnswer:")


def test_stop_sequence_split_across_deltas_is_never_emitted() -> None:
    scanner = StopScanner(["\nQ:"])
    out = [scanner.feed(d) for d in ["The disk", " filled.\n", "Q: next"]]
    assert "".join(out) == "The disk filled."
    assert scanner.stopped and scanner.feed("more") == "" and scanner.flush() == ""


def test_held_text_that_was_no_stop_is_released() -> None:
    scanner = StopScanner(["END"])
    assert scanner.feed("the E") == "the "
    assert scanner.feed("nd of it") == "End of it"  # case matters: not the stop
    assert scanner.feed(" E") == " "
    assert scanner.flush() == "E"


@settings(max_examples=80, deadline=None)
@given(st.text("abcXY ", max_size=40), st.lists(st.integers(1, 6), max_size=20),
       st.sampled_from(["XY", "aX", "Y"]))
def test_scanner_output_is_the_text_cut_at_the_first_stop(text: str, cuts: list[int],
                                                          stop: str) -> None:
    scanner, out, at = StopScanner([stop]), [], 0
    for n in [*cuts, len(text)]:
        out.append(scanner.feed(text[at:at + n]))
        at += n
    out.append(scanner.flush())
    expected = text[: text.find(stop)] if stop in text else text
    assert "".join(out) == expected


def test_the_render_wraps_instruction_and_user_turn_and_is_counted() -> None:
    def chat(instruction: str, user: str) -> str:
        return f"<s>system\n{instruction}</s><s>user\n{user}</s><s>assistant\n"

    texts = ["alpha " * 5, "gamma " * 5]
    prompt, packed = pack_prompt("why?", texts, words, 10_000, chat)
    assert packed == (1, 2)
    assert prompt.startswith(f"<s>system\n{INSTRUCTION}</s><s>user\nPassages:\n[1] alpha")
    assert prompt.endswith("Question: why?</s><s>assistant\n")
    # The template's own words count against the budget: one word less and gamma is out.
    exact = words(prompt)
    assert pack_prompt("why?", texts, words, exact, chat)[1] == (1, 2)
    assert pack_prompt("why?", texts, words, exact - 1, chat)[1] == (1,)
