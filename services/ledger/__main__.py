"""`python -m services.ledger` runs the ledger worker."""

from services.ledger import agents
from services.ledger.app import make
from services.ledger.settings import LedgerServiceSettings
from shared.settings import KafkaSettings
from shared.worker.runner import run_worker

settings, kafka = LedgerServiceSettings(), KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
