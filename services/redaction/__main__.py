"""`python -m services.redaction` runs the redaction worker."""

from shared.worker.lean_imports import DEEP_LEARNING, forgo

forgo(*DEEP_LEARNING)  # spaCy and Presidio would load torch (~340 MB) and never run it

from services.redaction import agents  # noqa: E402
from services.redaction.app import make  # noqa: E402
from services.redaction.settings import RedactionSettings  # noqa: E402
from shared.settings import KafkaSettings  # noqa: E402
from shared.worker.runner import run_worker  # noqa: E402

settings, kafka = RedactionSettings(), KafkaSettings()
app = make(settings, kafka)
agents.build(app, settings, kafka)
run_worker(app, settings.log_level, hosted=(settings,))
