"""No log line, traceback, crash message or warning carries an exception's text."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shared import logsafe
from shared.errors import InvalidInput
from shared.logsafe import WITHHELD, describe, format_exception
from shared.settings import ProcessSettings

ROOT = Path(__file__).resolve().parents[3]
PII = "Jennifer Lawrence 4111 1111 1111 1111 jl@example.com"

# Every channel by which Python and the frameworks report a failure, in one child process
# that installs the filter the way every service does (shared.worker.runner.run_worker), then a
# real Faust agent that crashes on a PII-laden record.
CHILD = textwrap.dedent(f'''
    import asyncio, logging, threading, warnings
    from shared import logsafe
    logsafe.install()
    from mode.utils.logging import setup_logging
    setup_logging(loglevel="DEBUG")  # the formatter Faust workers log through
    log = logging.getLogger("child")
    PII = {PII!r}
    try:
        try:
            raise ValueError(PII)
        except ValueError as e:
            raise KeyError(PII) from e
    except KeyError as exc:
        log.exception("handler failed: %r", exc)
        log.error("crash %s", exc)
        log.error(exc)
    warnings.warn(PII)
    def bad():
        raise RuntimeError(PII)
    t = threading.Thread(target=bad); t.start(); t.join()

    import faust
    app = faust.App("logsafe-child", broker="kafka://127.0.0.1:1", store="memory://")
    topic = app.topic("t", value_type=bytes, value_serializer="raw")

    @app.agent(topic)
    async def stage(stream):
        async for value in stream:
            value.decode("ascii") + "\\ud800".encode("utf-8")  # raises with the text inside

    async def crash():
        async with stage.test_context() as agent:
            await agent.put(PII.encode() + b" \\xc3\\xa9")
            await asyncio.sleep(0.2)

    async def orphan():
        async def boom():
            raise UnicodeEncodeError("utf-8", PII, 1, 2, "surrogates not allowed")
        asyncio.get_running_loop().create_task(boom())
        await asyncio.sleep(0.05)

    try:
        asyncio.run(crash())
    except BaseException as exc:
        log.exception("agent run failed: %r", exc)
    asyncio.run(orphan())
    import gc; gc.collect()
    raise TypeError(PII)
''')


def test_every_failure_channel_keeps_types_and_frames_but_no_text() -> None:
    run = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(ROOT)})
    out = run.stdout + run.stderr
    assert run.returncode == 1  # the final uncaught TypeError
    assert "Logging error" not in out, out  # every cleaned record still formats
    for piece in ("Jennifer", "Lawrence", "4111", "jl@example.com"):
        assert piece not in out.replace("PII", ""), out
    for seen in ("KeyError: <withheld>", "ValueError: <withheld>", "direct cause",
                 "RuntimeError: <withheld>", "UserWarning: <withheld>",
                 "UnicodeEncodeError: <withheld>", "TypeError: <withheld>",
                 "Task exception was never retrieved", "in bad",
                 "Crashed reason='UnicodeDecodeError(<withheld>)'"):
        assert seen in out, (seen, out)


def test_our_own_messages_are_kept_and_others_withheld() -> None:
    assert describe(InvalidInput("wrong_type", field="id")) == \
        "InvalidInput(wrong_type (field id))"
    assert describe(ValueError(PII)) == f"ValueError({WITHHELD})"
    try:
        raise InvalidInput("too_deep") from ValueError(PII)
    except InvalidInput as exc:
        text = format_exception(exc)
    assert "InvalidInput: too_deep" in text and "ValueError: <withheld>" in text
    assert "Jennifer" not in text


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A process whose settings named tmp_path/run, 127.0.0.1:19092 and STREAMRAG_DATA_DIR."""
    monkeypatch.setattr(logsafe, "_allowed", set())
    monkeypatch.setattr(logsafe, "_dirs", set())
    logsafe.allow(tmp_path / "run", "127.0.0.1:19092", "STREAMRAG_DATA_DIR")
    return tmp_path / "run"


def test_an_os_error_on_a_configured_path_names_it(configured: Path) -> None:
    inside = configured / "data" / "streamrag-chunking"
    exc = NotADirectoryError(20, "Not a directory", str(inside))
    assert describe(exc) == f"NotADirectoryError([Errno 20] Not a directory: '{inside}')"
    assert f"NotADirectoryError: [Errno 20] Not a directory: '{inside}'" in \
        format_exception(exc)


def test_an_os_error_elsewhere_keeps_its_errno_but_not_its_file_or_text(
        configured: Path) -> None:
    exc = FileNotFoundError(2, PII, f"/home/{PII}.txt")
    assert describe(exc) == f"FileNotFoundError([Errno 2] No such file or directory: {WITHHELD})"
    # the OS's own text for the errno is printed, never the exception's strerror
    assert describe(OSError(111, PII)) == "ConnectionRefusedError([Errno 111] Connection refused)"


def test_a_configured_address_or_setting_name_is_named_and_the_rest_withheld(
        configured: Path) -> None:
    exc = RuntimeError(f"cannot reach 127.0.0.1:19092 for {PII} (STREAMRAG_DATA_DIR)")
    assert describe(exc) == \
        f"RuntimeError({WITHHELD}; mentions 127.0.0.1:19092, STREAMRAG_DATA_DIR)"
    assert describe(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")) == \
        "ConnectionRefusedError([Errno 111] Connection refused)"


def test_record_text_stays_withheld_whatever_is_configured(configured: Path) -> None:
    for exc in (ValueError(PII), KeyError(PII), UnicodeEncodeError("utf-8", PII, 1, 2, "x"),
                OSError(PII), FileNotFoundError(PII)):
        text = describe(exc) + format_exception(exc)
        assert "Jennifer" not in text and "4111" not in text, text
        assert f"{type(exc).__name__}({WITHHELD})" == describe(exc)


def test_settings_allow_their_paths_and_names(configured: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(configured.parent / "elsewhere"))
    ProcessSettings()
    path = configured.parent / "elsewhere" / "x.json"
    assert f"'{path}'" in describe(PermissionError(13, "Permission denied", str(path)))
    assert "mentions STREAMRAG_LOG_LEVEL" in describe(ValueError("STREAMRAG_LOG_LEVEL=LOUD"))
