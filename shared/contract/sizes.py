"""The size contract: the largest input record, the record limit every topic, producer and
consumer of the mesh shares, and the largest record each stage derives from an input.

Measured (the real chunker and tokenizer, vectors of the real size; tests/unit/chunking/
test_sizes.py holds these shapes to the plan below) for a 1 MiB document: English prose
becomes a chunk set of 1.19x its size and an embedded chunk set of 3.6x (1,245 chunks,
each carrying a 2,048-byte base64 vector); text of one token per byte ("!!!...") 1.64x
and 9.75x (4,129 chunks). aiokafka's default record limit (1 MiB) and Faust's (1,000,000
bytes) were below all of these, and below a Document built from a 1 MiB input, so a valid
document could stop the stage that made the oversized record. The mesh therefore allows records of
GROWTH x the input limit (16 MiB) on every topic (`max.message.bytes`), in every producer
(`max_request_size`) and consumer (fetch size), and docker-compose's broker the same.

Planned from the input's size alone (`largest`, one token per byte, a 512-character id
and a title that takes its 64 tokens off each chunk's budget), the largest embedded chunk
set of a 1 MiB input is 16,127,808 bytes in clear and less sealed (the vectors travel as
raw float32 inside the seal, base64 once): under the limit with the default chunking. Every
stage still checks each record against the limit before it sends it (`check`): what does
not fit (a larger chunk overlap, text that redaction made longer, a shape beyond the plan)
is dead-lettered `derived_too_large`, never handed to a producer that would refuse it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.encoder.passage import TITLE_MAX_TOKENS
from shared.errors import InvalidInput

MIB = 1 << 20
MAX_INPUT_BYTES = MIB  # a docs.raw.v1 value (ingest's STREAMRAG_INGEST_MAX_PAYLOAD_BYTES)
GROWTH = 16  # a derived record may be this many times the input limit
MAX_RECORD_BYTES = GROWTH * MAX_INPUT_BYTES
MIN_RECORD_BYTES = 64 * 1024  # below this even a dead letter with its key may not fit
# The trace context every record carries (shared/tracing/context.py): a `traceparent`
# header (a 55-byte value) and a `tracestate` of at most MAX_TRACESTATE bytes, each with
# its name and length varints. aiokafka counts headers against max_request_size too.
MAX_TRACESTATE = 512  # the W3C limit a receiver must carry; a longer one is dropped
TRACE_HEADER_BYTES = (1 + len("traceparent") + 1 + 55) + (1 + len("tracestate") + 2
                                                          + MAX_TRACESTATE)
# A record batch's header (61 bytes) and one record's varints and attributes, with slack,
# and the trace headers: aiokafka compares this estimate plus key and value against
# max_request_size.
FRAMING_BYTES = 512 + TRACE_HEADER_BYTES

DERIVED_TOO_LARGE = "derived_too_large"


def value_limit(key: bytes | None, max_record_bytes: int = MAX_RECORD_BYTES) -> int:
    """The largest value a record with `key` may carry."""
    return max_record_bytes - FRAMING_BYTES - len(key or b"")


def fits(value: bytes, key: bytes | None, max_record_bytes: int = MAX_RECORD_BYTES) -> bool:
    return len(value) <= value_limit(key, max_record_bytes)


def check(value: bytes, key: bytes | None, what: str,
          max_record_bytes: int = MAX_RECORD_BYTES) -> None:
    """Raise InvalidInput(derived_too_large) when the record would be over the limit."""
    if not fits(value, key, max_record_bytes):
        limit = value_limit(key, max_record_bytes)
        msg = f"{what} of {len(value)} bytes > {limit} (record limit {max_record_bytes})"
        raise InvalidInput(DERIVED_TOO_LARGE, detail=msg)


# --- the largest derived records, planned from an input's size (pure arithmetic) ---

VECTOR_DIM = 384  # all-MiniLM-L6-v2 (shared/encoder/model.py MODEL_DIM)
MAX_ID_CHARS = 512  # ingest's max_id_length default
# Each chunk's JSON beside its text and id: field names, ordinal, counts, the chunk id's
# "#v<version>#<ordinal>#<12 hex>" and the vector's own quotes (generous: 160 measured 119).
CHUNK_FIELDS_BYTES = 160
# A set's fields beside its chunks (doc id, title, source, domain, times, model id).
SET_FIELDS_BYTES = 512


@dataclass(frozen=True)
class Shape:
    """What decides how large a document's derived records get beside its size."""

    id_bytes: int = MAX_ID_CHARS
    title_bytes: int = 0
    max_tokens: int = 254  # chunking's default budget
    overlap_tokens: int = 0
    dim: int = VECTOR_DIM
    long_title: bool = False  # a title of TITLE_MAX_TOKENS takes its tokens off the budget


def vector_b64_bytes(dim: int) -> int:
    return 4 * math.ceil(4 * dim / 3)


def planned_chunks(text_bytes: int, shape: Shape) -> int:
    """Chunks of a text at one token per byte (the densest the tokenizer cuts): one per
    core budget (the budget a title leaves, less the overlap)."""
    budget = shape.max_tokens
    if shape.long_title:  # services/chunking/documents.py text_budget
        budget = max(budget - TITLE_MAX_TOKENS, budget // 2)
    return math.ceil(text_bytes / (budget - shape.overlap_tokens)) if text_bytes else 0


def chunk_set_bytes(text_bytes: int, shape: Shape) -> int:
    """The largest ChunkSet (chunks.v1) of a text of `text_bytes` JSON bytes."""
    n = planned_chunks(text_bytes, shape)
    repeated = n * shape.overlap_tokens  # overlap repeats text, at most a byte per token
    per_chunk = CHUNK_FIELDS_BYTES + shape.id_bytes
    return SET_FIELDS_BYTES + shape.id_bytes + shape.title_bytes + text_bytes + repeated + \
        n * per_chunk


def embedded_set_bytes(text_bytes: int, shape: Shape) -> int:
    """The largest EmbeddedChunkSet (chunks.embedded.v1): the chunk set plus a vector and
    its field per chunk."""
    n = planned_chunks(text_bytes, shape)
    return chunk_set_bytes(text_bytes, shape) + n * (vector_b64_bytes(shape.dim) + 12)


# A sealed value's own bytes: nonce and tag (28), the zlib frame, the JSON head's length,
# kind and field names, and the key id's field.
SEAL_BYTES = 256


def _sealed(plain_bytes: int) -> int:
    """base64 of AES-GCM over zlib of `plain_bytes` (zlib never grows incompressible data
    by more than 5 bytes per 16 KiB block, with headroom)."""
    zipped = plain_bytes + 5 * math.ceil(plain_bytes / 16_384) + 16
    return 4 * math.ceil((zipped + SEAL_BYTES) / 3)


def sealed_chunk_set_bytes(text_bytes: int, shape: Shape, dim: int | None = None) -> int:
    """The largest sealed ChunkSet (dim None) or EmbeddedChunkSet (vectors of `dim`, as raw
    float32 inside the seal): the chunks' clear fields beside one sealed value holding the
    title, every text (JSON-quoted) and every vector."""
    n = planned_chunks(text_bytes, shape)
    repeated = n * shape.overlap_tokens
    vectors = n * 4 * dim if dim else 0
    plain = shape.title_bytes + text_bytes + repeated + 4 * n + vectors
    per_chunk = CHUNK_FIELDS_BYTES + shape.id_bytes + (12 if dim else 0)
    return SET_FIELDS_BYTES + shape.id_bytes + _sealed(plain) + n * per_chunk


def document_bytes(input_bytes: int) -> int:
    """The largest Document/RedactedDocument of an input: its text, title and metadata are
    at most the input's bytes (JSON escapes in the input count as much as in the output),
    plus the record's own fields and redaction's counts."""
    return input_bytes + 2 * SET_FIELDS_BYTES


def dead_letter_bytes(key_bytes: int, kept_payload_bytes: int) -> int:
    """A DeadLetter: a key (twice: record key and field), a detail of <= 500 characters,
    the payload's base64 when kept (only before redaction), a hash."""
    return 2 * key_bytes + 4 * math.ceil(kept_payload_bytes / 3) + 1024


WORST = Shape(long_title=True)


def largest(input_bytes: int, shape: Shape = WORST) -> dict[str, int]:
    """{record kind: its planned largest size} for an input of `input_bytes`."""
    return {
        "docs.raw.v1 input": input_bytes,
        "Document / RedactedDocument": document_bytes(input_bytes),
        "ChunkSet": chunk_set_bytes(input_bytes, shape),
        "EmbeddedChunkSet": embedded_set_bytes(input_bytes, shape),
        # Sealed under the version's data key (shared/contract/sealed.py), as the mesh
        # writes them; the redacted document grows by a third, its text in base64.
        "ChunkSet, sealed": sealed_chunk_set_bytes(input_bytes, shape),
        "EmbeddedChunkSet, sealed": sealed_chunk_set_bytes(input_bytes, shape, shape.dim),
        "RedactedDocument, sealed": SET_FIELDS_BYTES + _sealed(document_bytes(input_bytes)),
        "DeadLetter (raw, payload kept)": dead_letter_bytes(input_bytes, 256 * 1024),
    }
