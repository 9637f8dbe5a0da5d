"""What the encoder sees for a chunk: its document's title, then the chunk's text.

A chunk cut from the middle of a document loses the context its title gives ("Results"
of which study?), so the title leads every chunk's embedding input. Chunking counts the
title inside the token budget (a title longer than TITLE_MAX_TOKENS is cut to it) and
embedding builds the same string, so the model never truncates the chunk's own text.
With no title the input is the chunk text unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.encoder.tokenizer import TextTokenizer

TITLE_MAX_TOKENS = 64
SEPARATOR = "\n"  # whitespace: no token of its own for a WordPiece tokenizer


def clip_title(tokenizer: TextTokenizer, title: str,
               max_tokens: int = TITLE_MAX_TOKENS) -> str:
    """The title, stripped and cut after its first `max_tokens` tokens."""
    title = title.strip()
    if not title:
        return ""
    offsets = tokenizer(title, add_special_tokens=False,
                        return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= max_tokens:
        return title
    return title[: offsets[max_tokens - 1][1]]


def passage(title: str, text: str) -> str:
    """The embedding input for one chunk (`title` already clipped)."""
    return f"{title}{SEPARATOR}{text}" if title else text
