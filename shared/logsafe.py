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

What a log may still say about an exception, because it comes from the operator, not from a
record (`shown`):
- StreamragError messages (ConfigError, InfrastructureError ...): written by us about
  settings and infrastructure, never quoting input, so kept whole;
- an OSError's errno, as the OS's own text for it (`os.strerror`, never the exception's
  strerror, which anyone can set), and its filename when that lies under a configured
  path (the data dir, the run dir, a model cache: whatever `allow` was given);
- any other exception's message only as the configured values it mentions: the values
  and setting names passed to `allow` (paths, host:port, STREAMRAG_* names), each printed
  from the configuration, never copied from the message:
  `RuntimeError(<withheld>; mentions 127.0.0.1:19092)`.
Everything else (a record's text in a ValueError, a pydantic error's input, a KeyError's
key) stays withheld. Settings classes `allow` their paths and names when built
(shared/settings.py ProcessSettings), the mesh its run dir and addresses.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

from shared.errors import StreamragError

WITHHELD = "<withheld>"
_WARNING = re.compile(r"^(?P<where>.*?:\d+): (?P<category>\w+): ", re.S)
_installed = False
# Configured values a log may name (see the docstring): paths as given and absolute,
# host:port addresses, setting names.
_allowed: set[str] = set()
_dirs: set[str] = set()  # the absolute paths among them: a filename under one may be shown
# Libraries that put the analysed text itself into log arguments (Presidio logs a value
# it failed to validate): their arguments are withheld whatever they are.
QUOTING_LOGGERS = ("presidio-analyzer", "presidio-anonymizer", "spacy")


def allow(*values: object) -> None:
    """Let logs name these configured values (a path, a host:port, a setting's name)
    wherever an exception mentions them; None and empty values are skipped."""
    for value in values:
        text = "" if value is None else str(value)
        if len(text) < 3:  # "." or a one-digit port would match anywhere
            continue
        _allowed.add(text)
        if isinstance(value, Path):
            _allowed.add(absolute := os.path.abspath(value))
            _dirs.add(absolute)


def _configured_path(name: object) -> bool:
    if not isinstance(name, str | Path):
        return False
    path = os.path.abspath(name)
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in _dirs)


def _os_error(exc: OSError) -> str:
    text = f"[Errno {exc.errno}] {os.strerror(exc.errno)}" if exc.errno else WITHHELD
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    if names:
        text += ": " + " -> ".join(repr(str(n)) if _configured_path(n) else WITHHELD
                                   for n in names)
    return text


def _mentions(message: str) -> list[str]:
    """The configured values in `message`, the longest of any that overlap."""
    found = [v for v in _allowed if v in message]
    return sorted(v for v in found if not any(v != o and v in o for o in found))


def shown(exc: BaseException) -> str:
    """The part of an exception's message a log may carry (see the module docstring)."""
    if isinstance(exc, StreamragError):
        return str(exc)
    try:
        message = str(exc)
    except Exception:  # a broken __str__ says nothing
        message = ""
    head = _os_error(exc) if isinstance(exc, OSError) and \
        (exc.errno or exc.filename is not None) else WITHHELD
    mentions = [v for v in _mentions(message) if v not in head]
    return f"{head}; mentions {', '.join(mentions)}" if mentions else head


def describe(exc: BaseException) -> str:
    """What a log may say about an exception: its type, and what `shown` lets through."""
    return f"{type(exc).__name__}({shown(exc)})"


CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def format_exception(exc: BaseException, tb: TracebackType | None = None) -> str:
    """A traceback with every frame and exception type, and of each message only what
    `shown` lets through."""
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
        parts.append(f"{type(e).__name__}: {shown(e)}\n")
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
