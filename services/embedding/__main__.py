"""`python -m services.embedding` runs the embedding worker."""

from services.embedding.settings import EmbeddingSettings
from shared.worker.lean_imports import DEEP_LEARNING, forgo

settings = EmbeddingSettings()
if not settings.may_run_torch():
    forgo(*DEEP_LEARNING)  # ONNX on CPU: torch (~340 MB, via spaCy's thinc) would never run

from services.embedding import agents  # noqa: E402
from services.embedding.app import make  # noqa: E402
from shared.settings import KafkaSettings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

kafka = KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
