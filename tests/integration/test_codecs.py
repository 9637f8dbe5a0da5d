"""Every Kafka compression codec reaches the index: records produced with gzip, snappy, lz4
and zstd by two clients the mesh does not share code with (librdkafka through
confluent-kafka, and aiokafka) are read by every consumer of the mesh.

Without a codec library a consumer cannot decode such a batch and stops its partition:
a gzip record produced behind the compressed ones then never arrives either, which the
last document of each run checks."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer

from services.cli.mesh import Endpoints
from tests.support.mesh import chunks_of, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
CODECS = ("gzip", "snappy", "lz4", "zstd")
# One distinct, searchable sentence per codec and client.
TOPICS = {"gzip": "glacier survey", "snappy": "lighthouse keeper", "lz4": "orchard frost",
          "zstd": "violin workshop"}


def _doc(doc_id: str, codec: str, client: str) -> bytes:
    words = TOPICS[codec]
    return json.dumps({"id": doc_id, "source": f"codec-{client}",
                       "text": f"The {words} report was produced by {client} with {codec}."
                       }).encode()


def _confluent(bootstrap: str, codec: str, docs: list[tuple[str, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 20})
    for doc_id, value in docs:
        producer.produce("docs.raw.v1", value=value, key=doc_id.encode())
    assert producer.flush(30) == 0


def _aiokafka(bootstrap: str, codec: str, docs: list[tuple[str, bytes]]) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec,
                                    linger_ms=20)
        await producer.start()
        try:
            sent = [await producer.send("docs.raw.v1", value, key=doc_id.encode())
                    for doc_id, value in docs]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
    asyncio.run(go())


@pytest.mark.parametrize("client", ["confluent", "aiokafka"])
def test_every_codec_is_read_by_every_stage(onebox_mesh: Endpoints, client: str) -> None:
    mesh = onebox_mesh
    send = _confluent if client == "confluent" else _aiokafka
    ids = {}
    for codec in CODECS:
        doc_id = uid(f"{client}-{codec}")
        ids[codec] = doc_id
        send(mesh.bootstrap, codec, [(doc_id, _doc(doc_id, codec, client))])
    behind = uid(f"{client}-behind")  # a plain gzip record after every compressed one
    send(mesh.bootstrap, "gzip", [(behind, json.dumps({
        "id": behind, "source": f"codec-{client}",
        "text": "The quarry inventory arrived after every compressed record."}).encode())])

    for codec, doc_id in ids.items():
        hits = eventually(lambda d=doc_id, c=codec: chunks_of(mesh, TOPICS[c], d),
                          f"the {codec} document from {client} to become searchable")
        assert TOPICS[codec] in hits[0].text
        assert hits[0].source == f"codec-{client}"
    eventually(lambda: chunks_of(mesh, "quarry inventory", behind),
               "the record behind the compressed ones")
