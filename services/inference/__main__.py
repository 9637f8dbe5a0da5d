"""`python -m services.inference` runs the inference worker and its gRPC API."""

from services.inference.settings import InferenceSettings
from shared.worker.lean_imports import DEEP_LEARNING, forgo

settings = InferenceSettings()
if not settings.may_run_torch(at_start=True):
    # no reranker and an ONNX query encoder: no torch, or none until a generator loaded on
    # demand lifts this (services/inference/runtime.py load_generator)
    forgo(*DEEP_LEARNING)

from services.inference import agents  # noqa: E402
from services.inference.app import make  # noqa: E402
from shared.settings import KafkaSettings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

kafka = KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
