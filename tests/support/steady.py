"""A client nobody on the team wrote producing at a steady rate: confluent-kafka (librdkafka),
acks=all and idempotent, as a platform team's service would. It records which documents
the broker acknowledged, so a test can hold the mesh to every one of them."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from types import TracebackType

from confluent_kafka import KafkaError, Message, Producer

Doc = Callable[[str, int], bytes]


class SteadyProducer:
    """Produces document `prefix-N` to docs.raw.v1 every `1 / rate` seconds until stopped."""

    def __init__(self, bootstrap: str, prefix: str, doc: Doc, rate: float = 5.0,
                 topic: str = "docs.raw.v1") -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  # through a broker's restart: retried, never given up
                                  "message.timeout.ms": 300_000,
                                  "reconnect.backoff.max.ms": 1000})
        self.prefix, self.doc, self.interval, self.topic = prefix, doc, 1.0 / rate, topic
        self.acked: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"steady-{prefix}", daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _delivered(self, doc_id: str) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                self.acked.append(doc_id)
            else:
                self.failed.append((doc_id, err.str()))
        return report

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            doc_id = f"{self.prefix}-{n}"
            self.producer.produce(self.topic, self.doc(doc_id, n), key=doc_id.encode(),
                                  on_delivery=self._delivered(doc_id))
            self.sent, n = n + 1, n + 1
            self.producer.poll(0)
            time.sleep(self.interval)

    def wait_acked(self, count: int, timeout_s: float = 120) -> None:
        """Until at least `count` documents are acknowledged."""
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < count:
            if time.monotonic() > deadline:
                msg = f"only {len(self.acked)} of {count} acknowledged; failed: {self.failed[:3]}"
                raise AssertionError(msg)
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop producing and wait until every record sent is acknowledged or failed."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.producer.flush(300)


def plain_doc(words: list[str]) -> Doc:
    """Documents whose text names their id and one of `words`, for a question to find."""
    def doc(doc_id: str, n: int) -> bytes:
        return json.dumps({"id": doc_id, "source": "steady", "text":
                           f"Ledger entry {n}: the {words[n % len(words)]} shipment {doc_id} "
                           "was counted twice."}).encode()
    return doc
