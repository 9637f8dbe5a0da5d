"""Where this package replaces a private Faust or aiokafka method, and what was there before.

Every replacement goes through `replace`, so the originals stay reachable after install:
the compatibility test reads their signatures with the replacements in place, and a
replacement that wraps its original takes it from `replace`'s return value.
"""

from __future__ import annotations

from typing import Any

_originals: dict[tuple[type, str], Any] = {}


def replace(owner: type, name: str, new: Any) -> Any:
    """Set `owner.name` to `new` and return what it was before this package touched it."""
    old = _originals.setdefault((owner, name), getattr(owner, name))
    setattr(owner, name, new)
    return old


def original(owner: type, name: str) -> Any:
    """`owner.name` as the library defines it, replaced or not."""
    return _originals.get((owner, name), getattr(owner, name))


def replaced() -> set[tuple[type, str]]:
    """Every (class, attribute) replaced in this process so far."""
    return set(_originals)
