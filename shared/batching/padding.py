"""Padded-token arithmetic: what a batch of sequences costs one forward pass.

A padded forward pass runs every sequence at the length of the longest one, so its cost
is sequences x longest. Both the request queue's token limit and the encoder's split of a
batch into forward passes are counted this way, here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor

import numpy as np


def padded_tokens(sequences: int, longest: int) -> int:
    """Tokens one padded forward pass over `sequences` sequences of at most `longest` costs."""
    return sequences * longest


def budget_groups(order: Sequence[int], lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Split `order` (indices into `lengths`, shortest first) into groups whose padded size
    fits `budget`; a sequence alone over the budget is a group of its own."""
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        wider = max(longest, lengths[i])
        if current and padded_tokens(len(current) + 1, wider) > budget:
            groups.append(current)
            current, wider = [], lengths[i]
        current.append(i)
        longest = wider
    if current:
        groups.append(current)
    return groups


def spread(groups: list[list[int]], at_least: int) -> list[list[int]]:
    """`groups` (consecutive runs of a length-sorted order), re-cut into `at_least` runs of
    about equal size when there are fewer of them and enough sequences: so that many
    workers each get a pass even when the whole batch fits one budget."""
    order = [i for g in groups for i in g]
    parts = min(at_least, len(order))
    if len(groups) >= parts:
        return groups
    size, extra = divmod(len(order), parts)
    out, start = [], 0
    for p in range(parts):
        end = start + size + (p < extra)
        out.append(order[start:end])
        start = end
    return out


def encode_in_groups(texts: Sequence[str], lengths: Sequence[int], budget: int, dim: int,
                     forward: Callable[[list[str]], np.ndarray],
                     pool: Executor | None = None, workers: int = 1) -> np.ndarray:
    """`forward` over length-sorted groups that fit `budget` padded tokens; one float32 row
    per text, in input order (the encoders' batching, whatever runs the model).

    With a `pool` of `workers` threads the groups run side by side (at least `workers` of
    them when there are that many texts): `forward` must then be safe to call from several
    threads at once, as an ONNX Runtime session is."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    groups = budget_groups(order, lengths, budget)
    if pool is None or workers < 2:
        for group in groups:
            out[group] = forward([texts[i] for i in group])
        return out
    groups = spread(groups, workers)
    for group, rows in zip(groups, pool.map(lambda g: forward([texts[i] for i in g]), groups),
                           strict=True):
        out[group] = rows
    return out
