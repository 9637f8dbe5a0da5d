"""The real embedded mesh for integration tests: broker, dev chain and every service.

Every service process a test starts inherits this environment: none loads the bundled
generator (a real 135M-parameter model: torch, half a GiB and, on a fresh machine, its
one-time dequantising) unless the test asks for it, as tests/integration/
test_real_generator.py does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.mesh import Endpoints, free_port, isolated, spawn_broker
from services.cli.procs import stop
from services.cli.settings import MeshSettings
from tests.support.anvil import Anvil, running_anvil
from tests.support.mesh import GUARD_ENV, MESH_ENV, fault_env

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("STREAMRAG_INFERENCE_GENERATOR_BUNDLED", "false")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded Apache Kafka (one KRaft node) on free ports."""
    port = free_port()
    settings = MeshSettings(kafka_libs=ROOT / ".tools/kafka/libs")
    child = spawn_broker("127.0.0.1", port, tmp_path_factory.mktemp("broker"), settings)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop([child], 10)


@pytest.fixture(scope="session")
def mesh_metrics_url() -> str:
    """The multi-process mesh's inference Prometheus endpoint."""
    return f"http://127.0.0.1:{free_port()}/metrics"


@pytest.fixture(scope="session")
def inference_delays(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session mesh's test-only inference delays: a test writes {variant: seconds} here
    while it runs and removes the file after (tests/support/faults)."""
    return tmp_path_factory.mktemp("faults") / "inference-delays.json"


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory, broker: str,
         mesh_metrics_url: str, inference_delays: Path) -> Iterator[Endpoints]:
    """Start the whole mesh once, one process per service (as docker-compose runs it)."""
    metrics_port = mesh_metrics_url.rsplit(":", 1)[1].split("/")[0]
    env = {**MESH_ENV, **GUARD_ENV, **fault_env(inference_delays),
           "STREAMRAG_INFERENCE_METRICS_PORT": metrics_port}
    with isolated(tmp_path_factory.mktemp("mesh"), ROOT / ".tools/node_modules/.bin/anvil",
                  broker, env, processes=True) as endpoints:
        yield endpoints


@pytest.fixture(scope="session")
def onebox_metrics_url() -> str:
    """The one-process worker's Prometheus endpoint (its inference metrics)."""
    return f"http://127.0.0.1:{free_port()}/metrics"


@pytest.fixture(scope="session")
def onebox_mesh(tmp_path_factory: pytest.TempPathFactory,
                onebox_metrics_url: str) -> Iterator[Endpoints]:
    """The embedded default: every service in one worker process (services/onebox), with a
    broker of its own (on `mesh`'s broker both meshes would read and audit each document)."""
    metrics_port = onebox_metrics_url.rsplit(":", 1)[1].split("/")[0]
    env = {**MESH_ENV, "STREAMRAG_INFERENCE_METRICS_PORT": metrics_port}
    with isolated(tmp_path_factory.mktemp("onebox"), ROOT / ".tools/node_modules/.bin/anvil",
                  env=env, processes=False) as endpoints:
        yield endpoints


@pytest.fixture(params=["processes", "onebox"])
def each_mode(request: pytest.FixtureRequest) -> Endpoints:
    """The test runs on the multi-process mesh and on the one-process mesh."""
    endpoints: Endpoints = request.getfixturevalue("mesh" if request.param == "processes"
                                                   else "onebox_mesh")
    return endpoints


@pytest.fixture
def anvil(tmp_path: Path) -> Iterator[Anvil]:
    """A fresh anvil node of the test's own, with its state file in the test's tmp_path
    (modules that need needs_anvil mark themselves)."""
    with running_anvil(tmp_path) as node:
        yield node


# scripts/test runs the integration tests as three pytest processes side by side, split by
# the session mesh a test needs, so that each mesh starts once: "mesh" takes every test on
# the multi-process session mesh (and each_mode's processes half), "rest" the one-process
# mesh's and every test that starts meshes of its own, unless the module names its group
# with @pytest.mark.suite_group: "own" holds the long kill and restart tests that start
# their own brokers and meshes, to even the three out. Unset: every test, as a plain
# pytest run.
GROUPS = ("mesh", "rest", "own")


def test_group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("suite_group")
    if marker is not None:
        if marker.args[0] not in GROUPS:  # else the test would run in no group at all
            raise pytest.UsageError(f"{item.nodeid}: suite_group{marker.args} is not one of "
                                    f"{', '.join(GROUPS)}")
        return str(marker.args[0])
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "each_mode" in callspec.params:
        return "mesh" if callspec.params["each_mode"] == "processes" else "rest"
    return "mesh" if "mesh" in getattr(item, "fixturenames", ()) else "rest"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group = os.environ.get("STREAMRAG_TEST_GROUP", "")
    if not group:
        return
    if group not in GROUPS:
        raise pytest.UsageError(f"STREAMRAG_TEST_GROUP={group!r}: one of {', '.join(GROUPS)}")
    keep = [item for item in items if test_group(item) == group]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep
