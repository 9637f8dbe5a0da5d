"""LocalShards: answers in-process only when every asked shard is here, caught up, and no
rebalance is under way; otherwise None, so the caller goes through the broker."""

from __future__ import annotations

import asyncio

from services.retrieval.index import Shard
from services.retrieval.local import LocalShards
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards
from shared.contract.records import SearchReply, SearchRequest, SearchSpec, encode_vector
from tests.unit.retrieval.helpers import DIM, chunk_set, unit

PARTITIONS = [0, 1, 2, 3]


def shards_at(offsets: dict[int, int], ready_at: dict[int, int]) -> Shards:
    shards = Shards(RetrievalSettings())
    shards.models["m"], shards.by_model["m"] = DIM, {}
    for p, offset in offsets.items():
        shard = Shard("m", DIM)
        shard.offset = offset
        shards.by_model["m"][p] = shard
        shards.position[p] = (offset, "")
    shards.ready_at.update(ready_at)
    return shards


def requests() -> list[SearchRequest]:
    spec = SearchSpec(query_id="q", vector=encode_vector(unit(1)), top_k=3)
    return [SearchRequest(request_id="r", partition=p, model_id="m", dim=DIM, deadline=0.0,
                          queries=(spec,)) for p in PARTITIONS]


class Recorder:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def __call__(self, req: SearchRequest, partition: int) -> SearchReply:
        self.asked.append(partition)
        return SearchReply(request_id=req.request_id, partition=partition, shard_size=partition)


def all_assigned() -> set[int]:
    return set(PARTITIONS)


def run(local: LocalShards) -> list[SearchReply] | None:
    return asyncio.run(local.answer(requests()))


def test_every_shard_here_and_caught_up_answers_locally() -> None:
    answer = Recorder()
    local = LocalShards(shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9)),
                        answer, lambda: False, all_assigned)
    replies = run(local)
    assert replies is not None
    assert [(r.partition, r.shard_size) for r in replies] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert answer.asked == PARTITIONS
    assert local.answered == 4


def test_a_partial_assignment_goes_to_the_broker() -> None:
    answer = Recorder()
    local = LocalShards(shards_at({0: 9, 1: 9, 2: 9}, {0: 9, 1: 9, 2: 9}), answer,
                        lambda: False, lambda: {0, 1, 2})
    assert run(local) is None
    assert answer.asked == []
    assert local.answered == 0


def test_a_shard_still_held_but_no_longer_assigned_goes_to_the_broker() -> None:
    answer = Recorder()
    # Partition 3 moved away in a rebalance; its shard is released only once it completes.
    local = LocalShards(shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9)),
                        answer, lambda: False, lambda: {0, 1, 2})
    assert run(local) is None
    assert answer.asked == []


def test_no_assignment_goes_to_the_broker() -> None:
    answer = Recorder()
    assert run(LocalShards(shards_at({}, {}), answer, lambda: False, all_assigned)) is None
    assert answer.asked == []


def test_a_recovering_shard_sends_the_whole_search_to_the_broker() -> None:
    answer = Recorder()
    # Partition 2 has applied up to offset 5 of the 9 it must reach before it answers.
    local = LocalShards(shards_at({0: 9, 1: 9, 2: 5, 3: 9}, dict.fromkeys(PARTITIONS, 9)),
                        answer, lambda: False, all_assigned)
    assert run(local) is None
    assert answer.asked == []


def test_a_rebalance_under_way_goes_to_the_broker() -> None:
    answer = Recorder()
    local = LocalShards(shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9)),
                        answer, lambda: True, all_assigned)
    assert run(local) is None
    assert answer.asked == []


def test_a_rebalance_starting_between_shards_abandons_the_local_answer() -> None:
    answer = Recorder()
    local = LocalShards(shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9)),
                        answer, lambda: len(answer.asked) >= 2, all_assigned)
    assert run(local) is None
    assert answer.asked == [0, 1]
    assert local.answered == 0


def test_the_generation_moves_with_every_applied_record_and_only_then() -> None:
    shards = shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9))
    local = LocalShards(shards, Recorder(), lambda: False, all_assigned)
    before = local.generation(PARTITIONS)
    assert before is not None and local.generation(PARTITIONS) == before  # no change
    shards.apply(1, 10, chunk_set("doc", 1, [1]))
    after_upsert = local.generation(PARTITIONS)
    assert after_upsert not in (None, before)
    shards.applied(1, 10, b"record")  # the offset moving alone changes no answer
    assert local.generation(PARTITIONS) == after_upsert
    shards.apply(1, 11, chunk_set("doc", 2, [], op="delete"))
    assert local.generation(PARTITIONS) not in (None, after_upsert)


def test_the_generation_moves_when_shards_are_assigned_or_released() -> None:
    shards = shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9))
    before = shards.generation

    async def digest_at(partition: int, offset: int) -> str | None:
        return None
    asyncio.run(shards.assign({0: 10, 1: 10}, digest_at))
    assert shards.generation > before


def test_no_generation_where_the_shards_cannot_answer() -> None:
    local = LocalShards(shards_at(dict.fromkeys(PARTITIONS, 9), dict.fromkeys(PARTITIONS, 9)),
                        Recorder(), lambda: True, all_assigned)  # rebalancing
    assert local.generation(PARTITIONS) is None
