"""Inference's Faust side: the feedback tables and agent, and the gRPC runtime beside them.

Feedback (clicks and skips on cited chunks) arrives on feedback.v1 keyed by chunk id and
is counted in hopping one-hour windows (5-minute steps); the query engine reads the
window around now to boost or demote chunks. Bad records are dead-lettered.

Each instance counts the partitions it is assigned: with several inference instances a
chunk's feedback boosts only on the instance that owns its partition (see the note in
the README's inference section).
"""

from __future__ import annotations

import time
from typing import Any

from services.inference.app import app, kafka, settings
from services.inference.runtime import InferenceRuntime
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.errors import InvalidInput
from shared.faust_app import topic
from shared.records import Feedback
from shared.topics import CHUNK_CLICKS, CHUNK_SKIPS, DEADLETTER, FEEDBACK

WINDOW_S, STEP_S = 3600.0, 300.0
STAGE = "inference"

feedback_topic = topic(app, FEEDBACK)
deadletters = topic(app, DEADLETTER)


def _window_table(name: str, partitions: int) -> Any:
    table = app.Table(name, default=int, partitions=partitions, key_type=str, value_type=int)
    return table.hopping(WINDOW_S, STEP_S, expires=WINDOW_S + STEP_S).relative_to_stream()


clicks = _window_table(CHUNK_CLICKS.name, CHUNK_CLICKS.partitions)
skips = _window_table(CHUNK_SKIPS.name, CHUNK_SKIPS.partitions)


class WindowedFeedback:
    """The FeedbackView over the tables: counts in the one-hour window around now."""

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return int(clicks[chunk_id].now()), int(skips[chunk_id].now())


async def publish_feedback(chunk_id: str, kind: str) -> None:
    record = Feedback(chunk_id=chunk_id, kind=kind, at=time.time())  # type: ignore[arg-type]
    await feedback_topic.send(key=chunk_id.encode(), value=encode(record))


@app.agent(feedback_topic)
async def count_feedback(stream: Any) -> None:
    async for event in stream.events():
        try:
            record = decode(Feedback, event.message.value)
        except InvalidInput as exc:
            await send_dead_letter(deadletters, STAGE, exc, event.message)
            continue
        table = clicks if record.kind == "click" else skips
        table[record.chunk_id] += 1


@app.service
class Runtime(InferenceRuntime):
    """Faust builds this in its own loop when the app starts; bound to this app's settings."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(settings, kafka, feedback_sink=publish_feedback,
                         feedback_view=WindowedFeedback(), **kwargs)
