"""Where the data keys live and what wraps them (env prefix STREAMRAG_KEYS_)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# A dev-only key-encryption key so the embedded mesh works out of the box: it is public
# (derived from this phrase), so wrapping under it protects nothing against someone who
# can read the key store. Set STREAMRAG_KEYS_KEK (or STREAMRAG_KEYS_KEK_FILE) for anything
# real; destroying a version's key works under any KEK.
DEV_KEK = hashlib.sha256(b"streamrag dev key-encryption key").hexdigest()


class KeySettings(BaseSettings):
    """The data-key store every stage that seals or opens a document's text shares."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_KEYS_", frozen=True,
                                      populate_by_name=True)

    # The key store (SQLite). Unset: <STREAMRAG_DATA_DIR>/keys/versions.sqlite, which the
    # services of one machine share (the embedded mesh); docker-compose mounts one volume
    # at the same path in every service that seals or opens text. Backups never copy it.
    path: Path | None = None
    # The key-encryption key, 64 hex characters (AES-256 key wrap, RFC 3394).
    kek: SecretStr = SecretStr(DEV_KEK)
    # A file holding the key-encryption key instead (hex); it wins over `kek`.
    kek_file: Path | None = None

    def store_path(self) -> Path:
        # STREAMRAG_DATA_DIR as shared.settings.ProcessSettings reads it (a room above).
        data_dir = Path(os.environ.get("STREAMRAG_DATA_DIR") or ".run/data")
        return self.path or data_dir / "keys" / "versions.sqlite"

    def kek_bytes(self) -> bytes:
        text = (self.kek_file.read_text().strip() if self.kek_file is not None
                else self.kek.get_secret_value().strip())
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) != 32:
            name = "STREAMRAG_KEYS_KEK_FILE" if self.kek_file else "STREAMRAG_KEYS_KEK"
            raise ValueError(f"{name} must hold 64 hex characters (a 256-bit key)")
        return key
