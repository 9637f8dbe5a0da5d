"""Signed caller tokens for the tests of inference's authenticator: HS256 with a shared
secret, RS256/ES256 with keys made here, and the forgeries a verifier must refuse."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

SECRET = "test-secret-of-at-least-thirty-two-bytes!"
AUDIENCE = "streamrag-test"


def claims(sub: str | None, groups: list[Any] | None = None, *, aud: str | None = AUDIENCE,
           exp_in: float | None = 300.0, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict(extra)
    if sub is not None:
        out["sub"] = sub
    if groups is not None:
        out["groups"] = groups
    if aud is not None:
        out["aud"] = aud
    if exp_in is not None:
        out["exp"] = int(time.time() + exp_in)
    return out


def hs256(sub: str | None, groups: list[Any] | None = None, *, secret: str = SECRET,
          **kw: Any) -> str:
    return jwt.encode(claims(sub, groups, **kw), secret, algorithm="HS256")


def bearer(token: str) -> tuple[tuple[str, str]]:
    """gRPC metadata carrying the token."""
    return (("authorization", f"Bearer {token}"),)


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def jwks(*keys: tuple[str, str, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey]) -> str:
    """A JWKS document of the public halves of (kid, alg, private key)."""
    out = []
    for kid, alg, key in keys:
        algorithm = jwt.get_algorithm_by_name(alg)
        jwk = json.loads(algorithm.to_jwk(key.public_key()))
        out.append({**jwk, "kid": kid, "use": "sig"})
    return json.dumps({"keys": out})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(payload: dict[str, Any]) -> str:
    """alg none: no signature at all."""
    head = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{head}.{_b64(json.dumps(payload).encode())}."


def hs256_with(payload: dict[str, Any], key_bytes: bytes) -> str:
    """HS256 over `key_bytes` made by hand (PyJWT refuses a PEM as an HMAC secret): the
    RS/HS confusion attack, where the public key is used as the shared secret."""
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(payload).encode())
    sig = hmac.new(key_bytes, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"
