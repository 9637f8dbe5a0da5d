"""Whether this worker is still the group member that owns its partitions, asked of the
group coordinator right now.

A worker stopped (SIGSTOP, a long GC-like stall, a VM pause) past its session timeout is
evicted and its partitions go to another worker, which carries on from the committed
offset. When the stopped one wakes up, its agent finishes the batch it held before its
own heartbeat has heard of the eviction: Faust's revocation waits for that batch, and
aiokafka clears its member id only once a heartbeat answer says so. Anything the batch
writes that must be written once per input (redaction's audit record, which extends a
hash chain per partition) is then written twice: two batches extend the same chain end,
and the documents have two audit leaves (seen in tests/integration/test_scale_out.py's
fault schedule, 3 runs in 7).

`confirm(app)` sends a heartbeat with the consumer's generation and member id and awaits
the answer. NoError (or RebalanceInProgress: a member still in the group, whose partitions
are not handed on before its batch in hand is done) means this worker owns them, and the
answered heartbeat restarts its session, so it stays the owner for a session timeout
(enough for the send that follows). Anything else, an unknown member, an old generation,
no coordinator, no answer, means it may not own them. The caller then stops without
writing: the input replays on the partition's owner.

It reaches into aiokafka's group coordinator (`_send_req`, `generation`, `member_id`):
shared.kafka.patches lists this module in RELIES_ON and tests/unit/shared/kafka/
test_compat.py checks the method is there.
"""

from __future__ import annotations

import logging
from typing import Any

from aiokafka.errors import for_code
from aiokafka.protocol.group import HeartbeatRequest
from faust.exceptions import ConsumerNotStarted

log = logging.getLogger(__name__)
STILL_MEMBER = ("NoError", "RebalanceInProgressError")
# Answers that say for certain this worker's partitions went to another member.
NOT_MEMBER = ("UnknownMemberIdError", "IllegalGenerationError", "FencedInstanceIdError",
              "no member id (the group has evicted this worker)")


def coordinator(app: Any) -> Any:
    """The app's aiokafka group coordinator (None before the consumer has started)."""
    thread = getattr(app.consumer, "_thread", None)
    try:
        consumer = thread._ensure_consumer() if thread is not None else None
    except ConsumerNotStarted:
        return None
    return getattr(consumer, "_coordinator", None)


async def confirm(app: Any) -> str | None:
    """None if the group coordinator confirms this worker is a member of the current
    generation; else why not (an aiokafka error name, or what is missing)."""
    group = coordinator(app)
    if group is None:
        return "no group coordinator"
    member, generation = group.member_id, group.generation
    if not member:
        return "no member id (the group has evicted this worker)"
    request = HeartbeatRequest(group.group_id, generation, member)
    try:
        # The consumer lives on Faust's consumer thread, with its own event loop.
        response = await app.consumer._thread.call_thread(group._send_req, request)
    except Exception as exc:  # noqa: BLE001 - no answer: membership unconfirmed
        return type(exc).__name__
    error = for_code(response.error_code).__name__
    return None if error in STILL_MEMBER else error


async def evicted(app: Any) -> str | None:
    """Why this worker is certainly no longer the owner of its partitions, or None when it
    is, or may be: an answer that never came (a broker restarting) proves nothing, and a
    stage that writes at least once goes on writing."""
    why = await confirm(app)
    return why if why in NOT_MEMBER else None
