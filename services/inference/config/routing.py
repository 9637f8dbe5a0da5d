"""Which variant a query is served by: a stable hash of (caller, normalised question).

The hash picks a point in [0, 1); the variants, in name order, split that line by their
weights. The same caller asking the same thing lands on the same point, so in the same
variant while the weights stand. When weights change, each boundary moves by the change of
the weights before it: with two variants only the share that must move does (95/5 to 90/10
moves 5% of the points, all from stable to canary); with more, a point may also move
between two variants whose weights did not change, when a variant before them did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

SPACE = 2**64


def point(caller: str, question: str) -> int:
    """The query's point on [0, 2**64): blake2b of the caller and the normalised question."""
    words = " ".join(question.lower().split())
    digest = hashlib.blake2b(f"{caller}\n{words}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def route(weights: Mapping[str, int], caller: str, question: str) -> str:
    """The variant of (caller, question) under `weights` (not all zero); "" with none."""
    if not weights:
        return ""
    total = sum(weights.values())
    at = point(caller, question) * total // SPACE  # an integer in [0, total)
    for name in sorted(weights):
        if at < weights[name]:
            return name
        at -= weights[name]
    raise AssertionError("the weights add up to 0")
