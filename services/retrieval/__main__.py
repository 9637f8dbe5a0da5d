"""`python -m services.retrieval` runs the retrieval worker."""

from services.retrieval import agents
from services.retrieval.app import make
from services.retrieval.settings import RetrievalSettings
from shared.settings import KafkaSettings
from shared.worker.runner import run_worker

settings, kafka = RetrievalSettings(), KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
