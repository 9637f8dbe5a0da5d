"""The ports a worker listens on, tried before its Faust app starts, each named by its setting.

A worker's servers bind late: the process's /metrics in a task of the running app, inference's
gRPC and /metrics with its runtime. A port another process held (one more worker started with
the mesh's exact environment) failed there as `OSError: [Errno 98] Address already in use`,
naming no setting, after the worker had joined its consumer group, so the running workers
rebalanced for nothing, and again on every restart. `check_free` tries each port first and
fails with a ConfigError naming the variable, which `shared.worker.runner` prints as one line
before the app starts.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable

from shared.errors import ConfigError
from shared.settings import Listener


class PortTakenError(ConfigError):
    """A port the worker must listen on cannot be bound: another process holds it."""


def bind_error(host: str, port: int) -> OSError | None:
    """What binding host:port as a server would raise now; None when it would not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        return exc
    with socket.socket(family, kind, proto) as sock:
        # As the servers themselves bind: a predecessor's connections in TIME_WAIT do not
        # hold the port, a listening socket (gRPC's SO_REUSEPORT one too) does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


def check_free(listeners: Iterable[Listener]) -> None:
    """PortTakenError for the first port that cannot be bound, naming its setting."""
    for listener in listeners:
        error = bind_error(listener.host, listener.port) if listener.port else None
        if error is None:
            continue
        why = error.strerror or type(error).__name__
        if error.errno == errno.EADDRINUSE:
            why += " (another worker or process holds it)"
        msg = (f"{listener.setting}={listener.port}: cannot listen on {listener.host}:"
               f"{listener.port}: {why}; set {listener.setting} to a free port, or 0: "
               f"{listener.zero}")
        raise PortTakenError(msg)
