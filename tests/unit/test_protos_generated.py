"""The committed gRPC code in shared/rpc is exactly what scripts/gen_protos makes from protos/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "shared" / "rpc"


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_generated_code_matches_protos(tmp_path: Path) -> None:
    out = tmp_path / "rpc"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protos"), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    fresh, committed = _files(out), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed), "run scripts/gen_protos: the file set differs"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"run scripts/gen_protos: {stale} differ from protos/"


class _Channel:
    """Records the method paths a stub registers on it."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def _register(self, path: str, *args: object, **kwargs: object) -> object:
        self.paths.append(path)
        return object()

    unary_unary = unary_stream = stream_unary = stream_stream = _register


def test_generated_imports_are_package_relative() -> None:
    from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc

    grpc_source = (COMMITTED / "streamrag" / "v1" / "inference_pb2_grpc.py").read_text()
    assert "from . import inference_pb2" in grpc_source
    assert "from streamrag" not in grpc_source
    assert inference_pb2.DESCRIPTOR.package == "streamrag.v1"
    # The stub calls every method the service declares, at its full path, and nothing else.
    channel = _Channel()
    inference_pb2_grpc.InferenceStub(channel)
    methods = inference_pb2.DESCRIPTOR.services_by_name["Inference"].methods
    assert methods and sorted(channel.paths) == sorted(
        f"/streamrag.v1.Inference/{m.name}" for m in methods)
