"""Which chunks each restricted caller was recently shown: the permitted-check of feedback.

A click or skip is taken from a caller that may not read everything only on a chunk served
to the caller's scope (Access.scope()) within the feedback window; any other
chunk id, one that does not exist or one the caller may not read, is refused alike
(NOT_FOUND), so feedback never tells a caller whether a chunk it cannot read exists. What a
scope was served it could read when served (the shards filtered for it); a label revoked
since then leaves at most `ttl_s` of feedback, not of reading. Bounded: the least recently
served pairs leave first. This memory is per instance; a feedback receipt (`Receipts`,
below) carries the same proof to every instance sharing the feedback key
(docs/design/access-control.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

FEEDBACK_WINDOW_S = 3600.0  # the feedback tables' window: a click counts for an hour


class ServedChunks:
    def __init__(self, capacity: int, ttl_s: float = FEEDBACK_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity, self.ttl_s, self.clock = capacity, ttl_s, clock
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._at)

    def record(self, scope: str, chunk_ids: Iterable[str]) -> None:
        now = self.clock()
        for chunk_id in chunk_ids:
            key = (scope, chunk_id)
            self._at[key] = now
            self._at.move_to_end(key)
        while len(self._at) > self.capacity:
            self._at.popitem(last=False)

    def shown(self, scope: str, chunk_id: str) -> bool:
        at = self._at.get((scope, chunk_id))
        return at is not None and self.clock() - at <= self.ttl_s


class Receipts:
    """Feedback receipts: proof, to any instance holding the same key, that a caller scope
    was shown a chunk. Each citation carries one (`Citation.feedback_receipt`); feedback that
    passes it back is checked by HMAC instead of this instance's memory, so a click reaches
    whichever replica the load balancer picks. A receipt names neither the scope nor the
    chunk (the caller sends the chunk id beside it; the scope is its own token's), only its
    expiry: "v1.<expiry, epoch seconds>.<HMAC-SHA256, base64url>"."""

    PREFIX = "v1"

    def __init__(self, key: bytes, ttl_s: float = FEEDBACK_WINDOW_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.key, self.ttl_s, self.clock = key, ttl_s, clock

    def issue(self, scope: str, chunk_id: str) -> str:
        expiry = int(self.clock() + self.ttl_s)
        return f"{self.PREFIX}.{expiry}.{self._mac(scope, chunk_id, expiry)}"

    def valid(self, scope: str, chunk_id: str, receipt: str) -> bool:
        parts = receipt.split(".")
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
        if (len(parts) != 3 or parts[0] != self.PREFIX or not parts[1].isascii()
                or not parts[1].isdigit() or len(parts[1]) > 12):
            return False
        expiry = int(parts[1])
        if expiry < self.clock() or expiry > self.clock() + self.ttl_s + 60:
            return False  # expired, or from a clock (or a forger) too far ahead
        # As bytes: compare_digest refuses a str with non-ASCII characters (a TypeError).
        return hmac.compare_digest(parts[2].encode(), self._mac(scope, chunk_id, expiry).encode())

    def _mac(self, scope: str, chunk_id: str, expiry: int) -> str:
        message = b"\0".join([b"streamrag feedback receipt v1", scope.encode(),
                              chunk_id.encode(), str(expiry).encode()])
        digest = hmac.new(self.key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
