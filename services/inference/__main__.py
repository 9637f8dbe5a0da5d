"""`python -m services.inference` runs the inference worker and its gRPC API."""

from services.inference.settings import InferenceSettings
from shared.worker.lean_imports import DEEP_LEARNING, forgo

if not InferenceSettings().may_run_torch():
    forgo(*DEEP_LEARNING)  # no generator, no reranker, ONNX query encoder: no torch

from services.inference.agents import app  # noqa: E402
from services.inference.app import settings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

run_worker(app, settings.log_level, hosted=(settings,))
