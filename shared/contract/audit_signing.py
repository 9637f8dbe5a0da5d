"""Signatures on audit records: the bytes signed, signing, and recovering the signer.

An audit record is signed over sha256 of its canonical JSON (every field but `signature`,
keys sorted, no spaces, UTF-8) with an Ethereum-style secp256k1 key, as an EIP-191
personal message; the signer is the key's address. Any Ethereum library recovers it:
`Account.recover_message(encode_defunct(primitive=digest), signature=sig)`.
Redaction signs, the ledger and `streamrag audit verify` check against the known signers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar

from eth_account import Account
from eth_account.messages import encode_defunct
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract.records import AuditBatch, QueryAudit
from shared.errors import InvalidInput

# What is signed: redaction's batch records and inference's query audits (both carry
# `signer` and `signature`, and are signed the same way).
Signed = TypeVar("Signed", AuditBatch, QueryAudit)

# A dev-only key so the embedded mesh works out of the box: it is public (derived from
# this phrase), so anyone can sign as it. Set STREAMRAG_REDACTION_AUDIT_SIGNING_KEY and
# STREAMRAG_AUDIT_SIGNERS for anything real.
DEV_SIGNING_KEY = "0x" + hashlib.sha256(b"streamrag dev audit signer").hexdigest()
DEV_SIGNER = Account.from_key(DEV_SIGNING_KEY).address
# Inference's dev key for query audits: another address, so a query batch's anchor is never
# taken for a document batch (whose anchors `audit verify` reads by signer). Public too.
DEV_QUERY_SIGNING_KEY = "0x" + hashlib.sha256(b"streamrag dev query audit signer").hexdigest()
DEV_QUERY_SIGNER = Account.from_key(DEV_QUERY_SIGNING_KEY).address


class AuditSignerSettings(BaseSettings):
    """Whose signatures on audit records count (env prefix STREAMRAG_AUDIT_, shared with
    shared.contract.retention; the two keep their field names apart)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_AUDIT_", frozen=True)

    # Addresses whose signatures on audit records count (JSON list): the ledger anchors, and
    # `streamrag audit verify` accepts, only records one of them signed. The default is the
    # public dev key's address: fine for the embedded mesh only.
    signers: tuple[str, ...] = (DEV_SIGNER,)
    # Addresses whose signatures on query audits (audit.queries.v1) count (JSON list): the
    # ledger batches and anchors, and `streamrag audit prove --query` accepts, only those.
    # Keep them apart from `signers`. The default is inference's public dev key's address.
    query_signers: tuple[str, ...] = (DEV_QUERY_SIGNER,)

    def known(self) -> frozenset[str]:
        return frozenset(s.lower() for s in self.signers)

    def known_query(self) -> frozenset[str]:
        return frozenset(s.lower() for s in self.query_signers)


def signed_bytes(batch: AuditBatch | QueryAudit) -> bytes:
    """The canonical JSON of the record without its signature (what the digest covers)."""
    body: dict[str, Any] = batch.model_dump(mode="json", exclude={"signature"})
    return json.dumps(body, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def digest(batch: AuditBatch | QueryAudit) -> bytes:
    return hashlib.sha256(signed_bytes(batch)).digest()


def sign(batch: Signed, key: SecretStr) -> Signed:
    """The record with `signer` set to the key's address and `signature` over the rest."""
    account = Account.from_key(key.get_secret_value())
    body = batch.model_copy(update={"signer": account.address, "signature": ""})
    sig = account.sign_message(encode_defunct(primitive=digest(body))).signature
    return body.model_copy(update={"signature": "0x" + bytes(sig).hex()})


def recover(batch: AuditBatch | QueryAudit) -> str | None:
    """The address that signed the record, or None when it is unsigned or unreadable."""
    if not batch.signature:
        return None
    try:
        return str(Account.recover_message(encode_defunct(primitive=digest(batch)),
                                           signature=bytes.fromhex(
                                               batch.signature.removeprefix("0x"))))
    except Exception:  # a malformed signature is not a crash: it is no signature
        return None


def check(batch: AuditBatch | QueryAudit, known: frozenset[str]) -> str | None:
    """None when the record is signed by a known signer, else the reason it is not:
    unsigned, bad_signature (does not recover to its claimed signer) or unknown_signer."""
    if not batch.signature:
        return "unsigned"
    who = recover(batch)
    if who is None or who.lower() != batch.signer.lower():
        return "bad_signature"
    if who.lower() not in known:
        return "unknown_signer"
    return None


def require_signed(record: Signed, known: frozenset[str]) -> Signed:
    """The record, if a known signer signed it; else InvalidInput(unknown_signer or
    bad_signature), since anyone who can write to its topic could have produced it."""
    why = check(record, known)
    if why == "unknown_signer":
        raise InvalidInput("unknown_signer", "signer", record.signer)
    if why is not None:
        raise InvalidInput("bad_signature", "signature",
                           "no signature" if why == "unsigned" else
                           f"does not recover to {record.signer or '(no signer)'}")
    return record
