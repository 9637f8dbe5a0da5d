"""`streamrag subjects VALUE [--kind K] [--json]`: which documents mention a person.

Redaction keeps, per redacted document version, the keys of the e-mails, phone numbers,
names and identifiers it masked (pii.subjects.v1, compacted by doc id; the keys are
HMAC-SHA256 under STREAMRAG_REDACTION_SUBJECT_KEY, shared/contract/subjects.py). This
command keys VALUE the same way and lists the documents whose newest indexed version holds
it. Exit 0: some do; 1: none does; 2: the index cannot be read (no such topic, or no
broker). The value is never sent anywhere: only its keys are compared, here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract.codec import decode
from shared.contract.records import SubjectIndex
from shared.contract.subjects import (
    DEV_SUBJECT_KEY,
    KINDS,
    PHONE_REGIONS,
    Kind,
    key_id,
    keys_to_find,
)
from shared.contract.topics import PII_SUBJECTS
from shared.errors import InvalidInput
from shared.kafka.reader import read_topic
from shared.settings import KafkaSettings

FOUND, NONE_FOUND, UNREADABLE = 0, 1, 2


class SubjectKey(BaseSettings):
    """Redaction's subject key and phone regions as this command reads them (the variables
    are redaction's, listed with its settings; one value, two readers)."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore")

    # STREAMRAG_REDACTION_SUBJECT_KEY, the key the index was written under.
    key: SecretStr = Field(default=SecretStr(DEV_SUBJECT_KEY),
                           validation_alias="STREAMRAG_REDACTION_SUBJECT_KEY")
    # STREAMRAG_REDACTION_PHONE_REGIONS, the regions a national-format number is read in.
    phone_regions: tuple[str, ...] = Field(default=PHONE_REGIONS,
                                           validation_alias="STREAMRAG_REDACTION_PHONE_REGIONS")


class IndexUnreadable(Exception):  # noqa: N818 (a CLI outcome, said in one sentence)
    """The subject index cannot be read: the sentence says why."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("subjects", help="which documents mention a person (an e-mail, a phone "
                       "number, a name or an identifier), from redaction's keyed index")
    p.add_argument("value", help="the e-mail, phone number, name or identifier, written any "
                   "way (case, spacing and separators do not matter)")
    p.add_argument("--kind", choices=[*KINDS, "any"], default="any",
                   help="what VALUE is (default: any of them)")
    p.add_argument("--json", action="store_true", help="print the matches as JSON")


def wanted(key: bytes, kind: str, value: str, regions: tuple[str, ...]) -> set[str]:
    """Every key a version mentioning `value` may hold, for one kind or all."""
    kinds: tuple[Kind, ...] = KINDS if kind == "any" else (kind,)  # type: ignore[assignment]
    return {k for each in kinds for k in keys_to_find(key, each, value, regions)}


def newest(records: list[SubjectIndex]) -> dict[str, SubjectIndex]:
    """Each document's newest indexed version (the later record wins a tie: a replay)."""
    out: dict[str, SubjectIndex] = {}
    for record in records:
        held = out.get(record.doc_id)
        if held is None or record.version >= held.version:
            out[record.doc_id] = record
    return out


def matching(records: list[SubjectIndex], keys: set[str]) -> list[SubjectIndex]:
    """The newest versions that hold any of `keys`, by doc id."""
    return sorted((r for r in newest(records).values() if keys & set(r.subjects)),
                  key=lambda r: r.doc_id)


def table(found: list[SubjectIndex]) -> str:
    width = max([len("doc id"), *(len(r.doc_id) for r in found)])
    rows = [f"{'doc id':<{width}}  {'version':>7}  batch id"]
    rows += [f"{r.doc_id:<{width}}  {r.version:>7}  {r.batch_id or '-'}" for r in found]
    return "\n".join(rows)


async def read_index(kafka: KafkaSettings) -> list[SubjectIndex]:
    """Every readable record of pii.subjects.v1, in offset order per partition."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, request_timeout_ms=10_000,
                                **kafka.client_options())
    try:
        await admin.start()
        present = PII_SUBJECTS.name in await admin.list_topics()
    except KafkaError as exc:
        msg = (f"the broker at {kafka.bootstrap} is not reachable "
               f"({type(exc).__name__}), so the subject index cannot be read")
        raise IndexUnreadable(msg) from exc
    finally:
        await admin.close()
    if not present:
        msg = (f"{PII_SUBJECTS.name} is not on the broker at {kafka.bootstrap}: this mesh "
               f"keeps no subject index yet (`streamrag topics` creates it; redaction fills "
               f"it with each document version it redacts from then on)")
        raise IndexUnreadable(msg)
    out = []
    for record in await read_topic(kafka, PII_SUBJECTS):
        if record.value is None:
            continue  # a tombstone: the document is forgotten
        try:
            out.append(decode(SubjectIndex, record.value))
        except InvalidInput:
            continue  # not an index record: it names no document
    return out


def as_json(found: list[SubjectIndex], foreign: int) -> dict[str, Any]:
    return {"matches": [{"doc_id": r.doc_id, "version": r.version, "batch_id": r.batch_id}
                        for r in found],
            "records_under_another_key": foreign}


def run(args: argparse.Namespace) -> int:
    # The answer is the table; the Kafka client's INFO lines are not part of it.
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    subject = SubjectKey()
    key = subject.key.get_secret_value().encode()
    try:
        records = asyncio.run(read_index(KafkaSettings()))
    except IndexUnreadable as exc:
        print(f"streamrag subjects: {exc}.", file=sys.stderr)
        return UNREADABLE
    mine = key_id(key)
    foreign = sum(1 for r in newest(records).values() if r.key_id != mine)
    found = matching(records, wanted(key, args.kind, args.value, subject.phone_regions))
    if args.json:
        print(json.dumps(as_json(found, foreign), indent=2))
    elif found:
        print(table(found))
    else:
        print(f"no document's newest version mentions it ({len(newest(records))} indexed)")
    if foreign and not args.json:
        print(f"warning: {foreign} documents are indexed under another subject key "
              f"(STREAMRAG_REDACTION_SUBJECT_KEY differs from redaction's): none of them "
              f"can match", file=sys.stderr)
    return FOUND if found else NONE_FOUND
