"""The generator's recent pace, for `auto`'s estimate: seconds to the first token and per
token after it.

The first figures are the warm-up's, timed while the mesh is still starting (every service
loading at once): they can be twenty times too slow, and `auto` then quotes every answer
and measures nothing. So the first real measurement replaces them rather than being
averaged in, and `auto` asks for one (`due`) whenever it quotes on the estimate. Pure: the
clock comes in.
"""

from __future__ import annotations

from dataclasses import dataclass

WEIGHT = 0.2  # of the newest measurement in the moving averages
RECHECK_S = 30.0  # at most one measurement asked for by auto per this many seconds


@dataclass
class Pace:
    first_token_s: float
    per_token_s: float
    measured: bool = False  # False: still the warm-up's figures
    asked_at: float | None = None  # when auto last asked for a measurement (monotonic s)

    def estimate(self, new_tokens: int) -> float:
        return self.first_token_s + new_tokens * self.per_token_s

    def observe(self, first_token_s: float, per_token_s: float) -> None:
        if not self.measured:  # the warm-up's figures go: they were taken under start-up load
            self.first_token_s, self.per_token_s, self.measured = first_token_s, per_token_s, True
            return
        self.first_token_s += WEIGHT * (first_token_s - self.first_token_s)
        self.per_token_s += WEIGHT * (per_token_s - self.per_token_s)

    def due(self, now: float) -> bool:
        """Whether to measure again now that auto quoted on this estimate (and note it)."""
        if self.asked_at is not None and now - self.asked_at < RECHECK_S:
            return False
        self.asked_at = now
        return True
