"""Settings of the embedded bring-up (env prefix STREAMRAG_MESH_)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MeshSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_MESH_", frozen=True)

    run_dir: Path = Path(".run")
    anvil_bin: Path = Path(".tools/node_modules/.bin/anvil")
    # Start the embedded broker / dev chain unless something already answers there.
    embedded_broker: bool = True
    embedded_chain: bool = True
    # Journal every record and group offset of the embedded broker under run_dir/journal
    # and replay it into the broker at each start (shared/cli/journal.py): the embedded
    # broker keeps topics in memory only. Off: a restarted mesh starts empty.
    durable: bool = True
    # Every service's agents in one worker process (the default), or one process per
    # service as docker-compose runs them (`streamrag up --processes`).
    processes: bool = False
    inference_target: str = "127.0.0.1:50051"
    ready_timeout_s: float = Field(default=300.0, gt=0)
    stop_timeout_s: float = Field(default=15.0, gt=0)
    # Restarting a process that exits: the first wait, doubling up to the cap; a process
    # that ran this long before exiting starts the count over.
    restart_initial_s: float = Field(default=1.0, gt=0)
    restart_max_s: float = Field(default=30.0, gt=0)
    restart_reset_after_s: float = Field(default=60.0, gt=0)
