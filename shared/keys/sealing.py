"""One document version's key and what it does: seal text, open it, key a hash.

Three keys are derived from the version's random 256-bit key with HKDF-SHA256, one per
use. Sealing is AES-256-GCM with a synthetic nonce (an HMAC of the plaintext under the
nonce key), so the same text under the same version key seals to the same bytes: a
redelivered batch writes records identical to the first attempt's, as the audit trail
needs. Distinct texts get distinct nonces; the key is never shared between versions.
The associated data is the version's name, so a sealed text moved to another document
or version does not open.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES = 12


def _derive(key: bytes, use: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"streamrag/" + use).derive(key)


def key_id_for(doc_id: str, version: int) -> str:
    """The key's name: fixed by the version, so a replay and a forget agree on it."""
    digest = hashlib.sha256(f"streamrag key\0{doc_id}\0{version}".encode()).hexdigest()
    return "k" + digest[:31]


def transit_key_id(doc_id: str, generation: int) -> str:
    """A transit key's name (what ingest seals a change under before it has a version)."""
    digest = hashlib.sha256(f"streamrag transit\0{doc_id}\0{generation}".encode()).hexdigest()
    return "t" + digest[:31]


class SealError(Exception):
    """A sealed text that does not open under its key (altered, or another version's)."""


@dataclass(frozen=True)
class VersionKey:
    """The key of one document version (never logged: repr shows the id only)."""

    key_id: str
    doc_id: str
    version: int
    secret: bytes = field(repr=False)

    @property
    def _aad(self) -> bytes:
        return f"{self.doc_id}\0{self.version}".encode()

    def seal(self, plaintext: bytes) -> str:
        """base64 of nonce || AES-GCM ciphertext and tag; deterministic."""
        nonce = hmac.new(_derive(self.secret, b"nonce"), plaintext,
                         hashlib.sha256).digest()[:NONCE_BYTES]
        sealed = AESGCM(_derive(self.secret, b"seal")).encrypt(nonce, plaintext, self._aad)
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str) -> bytes:
        try:
            raw = base64.b64decode(sealed, validate=True)
            return AESGCM(_derive(self.secret, b"seal")).decrypt(
                raw[:NONCE_BYTES], raw[NONCE_BYTES:], self._aad)
        except (InvalidTag, ValueError) as exc:
            raise SealError(f"sealed text of {self.key_id} does not open") from exc

    def mac(self, data: bytes) -> str:
        """HMAC-SHA256 of `data` under the version's hash key, hex: a hash that nobody
        without the key can test a guess against."""
        return hmac.new(_derive(self.secret, b"mac"), data, hashlib.sha256).hexdigest()
