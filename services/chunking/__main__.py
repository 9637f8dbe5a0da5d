"""`python -m services.chunking` runs the chunking worker."""

from shared.worker.lean_imports import DEEP_LEARNING, forgo

forgo(*DEEP_LEARNING)  # it only counts tokens (shared/encoder/tokenizer.py): no model runs here

from services.chunking import agents  # noqa: E402
from services.chunking.app import make  # noqa: E402
from services.chunking.settings import ChunkingSettings  # noqa: E402
from shared.settings import KafkaSettings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

settings, kafka = ChunkingSettings(), KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
