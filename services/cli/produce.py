"""`streamrag produce PATH|-`: send txt, md, json and jsonl files to docs.raw.v1."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from tqdm import tqdm

from shared.contract.topics import DOCS_RAW
from shared.errors import InfrastructureError
from shared.settings import KafkaSettings

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".log"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("produce", help="send documents to the input topic")
    p.add_argument("paths", nargs="+", help="files or folders (txt, md, json, jsonl), or -")
    p.add_argument("--source", default="cli", help="source name for txt/md files")
    p.add_argument("--domain", default=None, help="domain for txt/md files")
    p.add_argument("--acl", default=None, metavar="LABELS",
                   help="who may read txt/md files: comma-separated access labels (groups, "
                        "user:<subject>, public); default: ingest's STREAMRAG_INGEST_DEFAULT_ACL")
    p.add_argument("--header", action="append", default=[], metavar="K=V",
                   help="record header, e.g. streamrag-source=tickets for mapped API JSON")


def records(path: Path | None, args: argparse.Namespace) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) pairs for one file, or stdin (JSON lines) when path is None."""
    if path is None:
        for line in sys.stdin.buffer:
            if line.strip():
                yield _key_of(line), line.rstrip(b"\n")
        return
    if path.suffix in TEXT_SUFFIXES:
        doc = {"id": str(path), "title": path.stem, "text": path.read_text("utf-8"),
               "source": args.source}
        if args.domain:
            doc["domain"] = args.domain
        if args.acl is not None:
            doc["acl"] = args.acl  # ingest checks the labels (bad ones: dead letter bad_acl)
        yield str(path).encode(), json.dumps(doc).encode()
    elif path.suffix == ".jsonl":
        for line in path.read_bytes().splitlines():
            if line.strip():
                yield _key_of(line), line
    elif path.suffix == ".json":
        data = path.read_bytes()
        items = json.loads(data)
        for item in items if isinstance(items, list) else [items]:
            raw = json.dumps(item).encode()
            yield _key_of(raw), raw


def _key_of(raw: bytes) -> bytes | None:
    """The doc id as key when the record says it, so versions of a doc stay in order."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None  # sent as is: ingest dead-letters it with the reason
    doc_id = obj.get("id") if isinstance(obj, dict) else None
    return str(doc_id).encode() if isinstance(doc_id, str | int) else None


def expand(paths: list[str]) -> list[Path | None]:
    out: list[Path | None] = []
    for p in paths:
        if p == "-":
            out.append(None)
        elif Path(p).is_dir():
            out += sorted(f for f in Path(p).rglob("*") if f.is_file()
                          and f.suffix in TEXT_SUFFIXES | {".json", ".jsonl"})
        else:
            out.append(Path(p))
    return out


async def send(kafka: KafkaSettings, items: Iterable[tuple[bytes | None, bytes]],
               headers: list[tuple[str, bytes]] | None = None, progress: bool = True) -> int:
    """Send (key, value) pairs to docs.raw.v1; returns how many were acknowledged."""
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5,
                                max_request_size=4 * 1024 * 1024, **kafka.producer_options(),
                                **kafka.client_options())
    await producer.start()
    pending: list[asyncio.Future[Any]] = []
    try:
        with tqdm(unit="rec", desc="producing", disable=None if progress else True) as bar:
            for key, value in items:
                pending.append(await producer.send(DOCS_RAW.name, value, key=key,
                                                   headers=headers or None))
                bar.update()
            await producer.flush()
        results = await asyncio.gather(*pending, return_exceptions=True)
    finally:
        await producer.stop()
    refused = [r for r in results if isinstance(r, BaseException)]
    if refused:  # counted as sent only once the broker said so
        acked = len(results) - len(refused)
        msg = (f"the broker refused {len(refused)} of {len(results)} records "
               f"({type(refused[0]).__name__}); {acked} were acknowledged")
        raise InfrastructureError(msg)
    return len(results)


def run(args: argparse.Namespace) -> int:
    headers = [(k, v.encode()) for k, _, v in (h.partition("=") for h in args.header)]
    items = (item for path in expand(args.paths) for item in records(path, args))
    try:
        sent = asyncio.run(send(KafkaSettings(), items, headers))
    except InfrastructureError as exc:
        print(f"streamrag produce: {exc}", file=sys.stderr)
        return 1
    print(f"sent {sent} records to {DOCS_RAW.name}")
    return 0
