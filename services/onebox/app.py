"""The one app of one-process mode, and every service's agents registered on it.

Each service keeps its own settings (its env prefix, data dir, batching); only the Faust app,
its consumer group (`streamrag-onebox`) and its one consumer are shared. The services are
imported by name, after the one app exists, so their `make_app` calls return it: they are
not changed for this mode, and the distributed deployment runs them as before.
"""

from __future__ import annotations

import importlib

from services.onebox.settings import OneboxSettings
from shared.contract.topics import ONEBOX_APP
from shared.kafka.app import make_one_app
from shared.settings import KafkaSettings

settings = OneboxSettings()
kafka = KafkaSettings()
app = make_one_app(ONEBOX_APP, kafka, settings.data_dir)

for name in settings.services:
    importlib.import_module(f"services.{name}.agents")
# Each hosted service's settings, as its own app module built them (the ports they name).
hosted = tuple(importlib.import_module(f"services.{name}.app").settings
               for name in settings.services)
