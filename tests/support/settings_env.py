"""Which environment variables the code reads, and a settings class read from a given
environment: shared by the deployment tests (compose, Kubernetes)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import TypeVar
from unittest import mock

from pydantic_settings import BaseSettings

from services.cli.settings import MeshSettings
from services.inference.audit.settings import QueryAuditSettings
from shared.contract.audit_signing import AuditSignerSettings
from shared.contract.query_audit import AuditPrincipalSettings
from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import SERVICES
from shared.keys.settings import KeySettings
from shared.settings import (
    KafkaSettings,
    LedgerSettings,
    PartitionSettings,
    ProcessSettings,
    env_names,
)
from shared.tracing.settings import TracingSettings

S = TypeVar("S", bound=BaseSettings)


def settings_classes() -> list[type[BaseSettings]]:
    classes: list[type[BaseSettings]] = [ProcessSettings, KafkaSettings, PartitionSettings,
                                         LedgerSettings, MeshSettings, AuditSignerSettings,
                                         AuditRetentionSettings, TracingSettings,
                                         AuditPrincipalSettings, QueryAuditSettings, KeySettings]
    for name in SERVICES:
        module = importlib.import_module(f"services.{name}.settings")
        classes += [c for c in vars(module).values() if isinstance(c, type)
                    and issubclass(c, BaseSettings) and c.__module__ == module.__name__]
    return classes


def known_env_vars() -> set[str]:
    return {name for cls in settings_classes() for name in env_names(cls).values()}


def read_under(cls: type[S], env: Mapping[str, str]) -> S:
    """`cls()` as a process with exactly these STREAMRAG_* variables would build it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_")}
    with mock.patch.dict(os.environ, {**base, **env}, clear=True):
        return cls()
