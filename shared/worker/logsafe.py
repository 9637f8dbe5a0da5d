"""Logs that never carry document content: the one place every service enforces it.

An exception's message may quote the input that caused it (a UnicodeEncodeError shows
the string, a pydantic error the value, a KeyError the key), and frameworks log crashes
with the exception's repr. So every log record is cleaned when it is created, whoever
creates it (our code, Faust, mode, aiokafka, asyncio, Presidio, py.warnings):
- an exception passed as a message argument becomes `TypeName(<withheld>)`;
- a traceback keeps its frames (file, line, function, source line) and each exception's
  type, but not its message, through the whole `__cause__`/`__context__` chain;
- a warning keeps where it was raised and its category, not its text.
Uncaught exceptions (main thread, other threads) are printed the same way.
StreamragError messages are written by us and never quote input, so they are kept.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import traceback
from types import TracebackType
from typing import Any

from shared.errors import StreamragError

WITHHELD = "<withheld>"
_WARNING = re.compile(r"^(?P<where>.*?:\d+): (?P<category>\w+): ", re.S)
_installed = False
# Libraries that put the analysed text itself into log arguments (Presidio logs a value
# it failed to validate): their arguments are withheld whatever they are.
QUOTING_LOGGERS = ("presidio-analyzer", "presidio-anonymizer", "spacy")


def describe(exc: BaseException) -> str:
    """What a log may say about an exception: its type, and our own messages."""
    if isinstance(exc, StreamragError):
        return f"{type(exc).__name__}({exc})"
    return f"{type(exc).__name__}({WITHHELD})"


CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def format_exception(exc: BaseException, tb: TracebackType | None = None) -> str:
    """A traceback with every frame and exception type, and no exception message."""
    # chain[k] = (exception, how the exception before it in the chain relates to it)
    chain: list[tuple[BaseException, str]] = [(exc, "")]
    seen = {id(exc)}
    while True:
        cur = chain[-1][0]
        nxt, note = ((cur.__cause__, CAUSE) if cur.__cause__ is not None else
                     (None if cur.__suppress_context__ else cur.__context__, CONTEXT))
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        chain.append((nxt, note))
    parts: list[str] = []
    for k in range(len(chain) - 1, -1, -1):  # root cause first, as Python prints it
        e, note = chain[k]
        frames = tb if (k == 0 and tb is not None) else e.__traceback__
        if frames is not None:
            parts.append("Traceback (most recent call last):\n")
            parts += traceback.format_tb(frames)
        parts.append(f"{type(e).__name__}: "
                     f"{e if isinstance(e, StreamragError) else WITHHELD}\n")
        if k > 0:
            parts.append(note)
    return "".join(parts).rstrip("\n")


def _clean_arg(arg: Any) -> Any:
    return describe(arg) if isinstance(arg, BaseException) else arg


def _scrub_message(record: logging.LogRecord, exc: BaseException) -> None:
    """Replace the exception's text where a framework already formatted it into the message
    (asyncio's "Task exception was never retrieved" embeds the exception's repr)."""
    try:
        text = record.getMessage()
    except Exception:  # a broken format string: keep the template, drop the arguments
        text, record.args = str(record.msg), ()
    cur: BaseException | None = exc
    seen: set[int] = set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for shown in {repr(cur), str(cur)}:
            if len(shown) >= 4 and shown in text:
                text = text.replace(shown, describe(cur))
        cur = cur.__cause__ or cur.__context__
    record.msg, record.args = text, ()  # a tuple: mode wraps anything else in one


def clean(record: logging.LogRecord) -> logging.LogRecord:
    """Strip exception messages and warning texts from a record, in place."""
    if isinstance(record.msg, BaseException):
        record.msg = describe(record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(_clean_arg(a) for a in record.args)
    elif isinstance(record.args, dict):
        record.args = {k: _clean_arg(v) for k, v in record.args.items()}
    if record.exc_info and record.exc_info[1] is not None:
        _scrub_message(record, record.exc_info[1])
        record.exc_text = format_exception(record.exc_info[1], record.exc_info[2])
        record.exc_info = None
    if record.name.split(".")[0] in QUOTING_LOGGERS and record.args:
        record.args = tuple(WITHHELD for _ in record.args) \
            if isinstance(record.args, tuple) else ()
    if record.name == "py.warnings":
        text = record.getMessage()
        m = _WARNING.match(text)
        record.msg = f"{m['where']}: {m['category']}: {WITHHELD}" if m else \
            f"warning: {WITHHELD}"
        record.args = ()
    return record


def _excepthook(kind: type[BaseException], exc: BaseException,
                tb: TracebackType | None) -> None:
    sys.stderr.write(format_exception(exc, tb) + "\n")


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is not None:
        name = args.thread.name if args.thread is not None else "?"
        sys.stderr.write(f"Exception in thread {name}:\n"
                         f"{format_exception(args.exc_value, args.exc_traceback)}\n")


def install() -> None:
    """Clean every log record this process creates from now on; idempotent.

    STREAMRAG_LOG_UNSAFE=1 leaves logging alone, to debug start-up errors on a machine
    that holds no personal data (read here: logging is set up before any settings are).
    """
    global _installed
    if _installed or os.environ.get("STREAMRAG_LOG_UNSAFE") == "1":
        return
    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return clean(make(*args, **kwargs))

    logging.setLogRecordFactory(factory)
    logging.captureWarnings(True)
    sys.excepthook = _excepthook
    threading.excepthook = _thread_excepthook
    _installed = True
