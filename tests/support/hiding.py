"""Ways to hide a character from a pattern while a reader still sees it: the forms the
hidden-character properties draw from (shared.text.visible must read through all of them)."""

from __future__ import annotations

# Format characters and fillers: zero-width space/non-joiner/joiner, soft hyphen, bidi
# marks, embeddings and isolates, word joiner, BOM, a tag character, grapheme joiner.
HIDDEN = ["\u200b", "\u200c", "\u200d", "\u00ad", "\u200e", "\u200f", "\u2060", "\ufeff",
          "\u202a", "\u202c", "\u2066", "\u2069", "\U000e0041", "\u034f"]
ODD_SPACES = ["\u2009", "\u00a0", "\u202f", "\u2007", "\u3000"]


def digit_forms(d: int) -> list[str]:
    """One digit as a reader reads it: ASCII, fullwidth, mathematical bold/double-struck/
    monospace, Arabic-Indic, Devanagari, or with a combining mark."""
    return [str(d), chr(0xFF10 + d), chr(0x1D7CE + d), chr(0x1D7D8 + d), chr(0x1D7F6 + d),
            chr(0x0660 + d), chr(0x0966 + d), f"{d}\u0332", f"{d}\u20e3"]
