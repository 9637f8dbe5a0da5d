"""Every record a Faust app writes carries the trace context of the record in hand.

Faust builds every outgoing record's headers in `Channel.prepare_headers` (send,
send_soon and the table changelogs all pass there); the replacement adds
`shared.tracing.context.outgoing` (set by the stage boundary for the record in hand) unless
the caller set a `traceparent` itself. Outside a record's block nothing is added.

Not a workaround of a Faust bug: Faust has no hook for outgoing headers. Removable if Faust
gains one (a producer interceptor or a header callback).
"""

from __future__ import annotations

from typing import Any

from shared.kafka.seam import original, replace
from shared.tracing import context

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    from faust.channels import Channel

    library = original(Channel, "prepare_headers")

    def prepare_headers(self: Any, headers: Any) -> Any:
        prepared = library(self, headers)
        if context.outgoing.get() is None:
            return prepared
        return context.with_trace(prepared)

    replace(Channel, "prepare_headers", prepare_headers)
    _installed = True
