"""What a module keeps at its top level that a stage object should keep instead."""

from __future__ import annotations
import __future__

import functools
from logging import Logger
from types import ModuleType
from typing import Any, NoReturn, TypeVar

from prometheus_client.metrics import MetricWrapperBase

# Functions, classes, modules, loggers, process-wide metrics and constants.
STATELESS = (ModuleType, type, type(len), type(lambda: 0), __future__._Feature, Logger,
             MetricWrapperBase, str, int, float, tuple, frozenset, TypeVar,
             functools._lru_cache_wrapper)  # a cached function, imported: not this module's


def frozen(value: object) -> bool:
    params = getattr(type(value), "__dataclass_params__", None)
    return bool(params and params.frozen)


def mutable_state(module: ModuleType) -> dict[str, Any]:
    """The module's top-level names bound to anything but the stateless kinds above."""
    return {name: value for name, value in vars(module).items()
            if not name.startswith("__") and not isinstance(value, STATELESS)
            and value is not NoReturn and not frozen(value)}
