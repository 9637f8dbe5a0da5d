"""`streamrag query` against an in-process server: the printed answer, table and JSON."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import threading
from collections.abc import Iterator

import pytest

from services.cli import query
from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.settings import KafkaSettings
from tests.support.polling import eventually_async
from tests.unit.inference.fakes import FakeSearch, WordEncoder, hit

LONG = "Disk usage on the broker reached ninety percent before anyone noticed it. " * 3
CHUNKS = {0: [hit("incident-7#0", 0.91, LONG, doc_id="incident-7")],
          3: [hit("runbook#2", 0.52, "Rotate the broker logs when the disk fills up.",
                  doc_id="runbook")]}


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    """A server on its own loop in a thread, as a separate process would be to the CLI."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, InferenceRuntime] = {}

    async def main() -> None:
        settings = InferenceSettings(grpc_port=0, grace_s=0, shard_timeout_s=0.2)
        search = FakeSearch(CHUNKS, silent=frozenset({2}))
        runtime = InferenceRuntime(settings, KafkaSettings(), search=search,
                                   encoder_factory=WordEncoder)
        holder["rt"] = runtime
        await runtime.start()
        await eventually_async(lambda: runtime.engine.ready, "the engine to be ready")
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(main(), loop).result(10)
    assert ready.wait(10)
    yield f"127.0.0.1:{holder['rt'].port}"
    asyncio.run_coroutine_threadsafe(holder["rt"].stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    query.add_parser(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    code = query.run(parser.parse_args(["query", *argv]), out=out)
    return code, out.getvalue()


def test_prints_answer_then_citation_table(target: str) -> None:
    code, out = run("how full was the broker disk?", "--target", target, "--timeout", "10")
    lines = out.splitlines()
    assert code == 0
    assert "reached ninety percent before anyone noticed it. [1]" in lines[0]
    assert "Rotate the broker logs when the disk fills up. [2]" in lines[0]
    assert "(extractive answer" in out and "partial result: shard(s) 2 did not answer" in out
    header = next(i for i, line in enumerate(lines) if line.startswith("n "))
    assert lines[header].split() == ["n", "score", "doc", "id", "chunk", "id", "event", "time",
                                     "text"]
    first = lines[header + 1]
    assert first.split()[:4] == ["1", "0.910", "incident-7", "incident-7#0"]
    assert "2023-11-14 22:13:20" in first
    assert first.endswith("…") and len(first.split("22:13:20", 1)[1].strip()) == 80
    assert lines[header + 2].split()[:4] == ["2", "0.520", "runbook", "runbook#2"]


def test_stream_prints_the_same_answer(target: str) -> None:
    _, unary = run("broker disk", "--target", target)
    code, streamed = run("broker disk", "--target", target, "--stream")
    assert code == 0
    assert streamed.splitlines()[0] == unary.splitlines()[0]
    assert "finish: stop" in streamed


def test_json_outputs(target: str) -> None:
    _, out = run("broker disk", "--target", target, "--json", "--top-k", "1")
    data = json.loads(out)
    assert [c["chunk_id"] for c in data["citations"]] == ["incident-7#0"]
    assert (data["answer_mode"], data["partial"], data["missing_shards"]) == (
        "extractive", True, [2])
    _, out = run("broker disk", "--target", target, "--json", "--stream")
    events = [next(iter(set(json.loads(line)) & {"start", "delta", "end"}))
              for line in out.splitlines()]
    assert events[0] == "start" and events[-1] == "end" and "delta" in events


def test_invalid_argument_exits_2_and_says_which(target: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("q", "--target", target, "--since", "last week")
    assert code == 2
    assert "INVALID_ARGUMENT: invalid since" in capsys.readouterr().err


def test_format_citations_with_no_rows() -> None:
    assert query.format_citations([]).split() == ["n", "score", "doc", "id", "chunk", "id",
                                                  "event", "time", "text"]
    assert pb.Citation().score == 0.0


def test_the_citation_check_is_printed_with_the_answer(target: str) -> None:
    _, out = run("how full was the broker disk?", "--target", target)
    # First mention first: the answer quotes the runbook [2] before the incident [1].
    assert "cites [2], [1] (as quoted); 100% of its sentences grounded in them" in out


def test_generative_without_a_model_is_the_callers_error(
        target: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("broker disk", "--target", target, "--mode", "generative")
    assert code == 2
    assert "FAILED_PRECONDITION: invalid answer_mode (no_generator)" in capsys.readouterr().err
    code, out = run("broker disk", "--target", target, "--mode", "auto", "--json")
    data = json.loads(out)
    assert (data["answer_mode"], data["answer_mode_reason"]) == ("extractive", "no_generator")


def test_the_cli_says_why_an_answer_is_quoted(target: str) -> None:
    from services.cli.query import reason_line
    _, out = run("broker disk", "--target", target, "--mode", "auto")
    assert "no generator is loaded" in out  # auto on a server without a generator
    assert "latency objective" in reason_line("latency_objective")
    assert "replaced" in reason_line("quality")
    why = "unsupported: 67% of the generated answer's sentences were grounded"
    assert reason_line(why) == why  # the server's own words, not hidden
    assert reason_line("requested") == reason_line("fits") == ""
