"""The inference Faust app and its settings."""

from services.inference.settings import InferenceSettings
from shared.faust_app import make_app
from shared.settings import KafkaSettings
from shared.topics import INFERENCE_APP

settings = InferenceSettings()
kafka = KafkaSettings()
app = make_app(INFERENCE_APP, kafka, settings.data_dir)
