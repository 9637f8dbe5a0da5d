"""`python -m services.ingest` runs the ingest worker."""

from services.ingest import agents
from services.ingest.app import make
from services.ingest.settings import IngestSettings
from shared.settings import KafkaSettings
from shared.worker.runner import run_worker

settings, kafka = IngestSettings(), KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
