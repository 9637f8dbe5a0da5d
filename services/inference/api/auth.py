"""Who may call, and as whom: the bearer-token check of every call but health checks.

Three modes, from the settings (docs/design/access-control.md):
- open: no token and no JWT key configured; every caller is OPEN_PRINCIPAL (reads everything).
- service account: `authorization: Bearer <auth_token>`; reads everything, or only
  service_account_groups when set.
- users: `authorization: Bearer <jwt>` signed with the HS256 secret, or an RS256/ES256 key
  (a PEM public key or a JWKS file); exp and aud required and checked, iss when set.
  The principal is `sub`, its groups the groups claim: a list of strings, else the token is
  refused (names outside the label grammar and `user:` labels are dropped and counted,
  never echoed).
The service account and users may both be configured. A call carries one authorization
header: two or more are refused (ambiguous_token), never read as the first or the last. A
refusal is UNAUTHENTICATED with a reason (metadata streamrag-reason) that never quotes the
token.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import grpc
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from jwt.exceptions import InvalidSubjectError

from services.inference.api.principal import (
    OPEN_PRINCIPAL,
    SERVICE,
    USER,
    Principal,
    bound,
)
from services.inference.settings import InferenceSettings
from shared.contract.access import LABEL, USER_PREFIX, Access

log = logging.getLogger(__name__)

# Orchestrators probe health without credentials; everything else is locked.
OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
# The calls whose handlers see the principal (principal.current()).
BOUND_PREFIX = "/streamrag.v1.Inference/"
SECRET_ALGORITHMS = ("HS256",)
KEY_ALGORITHMS = ("RS256", "ES256")
MAX_TOKEN_CHARS = 16_384
MAX_SUBJECT_CHARS = 256
MAX_GROUPS = 256
SERVICE_SUBJECT = "service"
IgnoredSink = Callable[[int], None]  # groups dropped from one token


class AuthError(Exception):
    """A call without acceptable credentials; `reason` is stable, `detail` quotes nothing sent."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class TokenVerifier:
    """The pure check: an authorization header in, a Principal out, or AuthError."""

    def __init__(self, settings: InferenceSettings, on_ignored: IgnoredSink | None = None,
                 ) -> None:
        s = settings
        token = s.auth_token.get_secret_value() if s.auth_token else ""
        self._service = f"Bearer {token}".encode() if token else b""
        groups = s.service_account_groups
        self._service_access = (Access.everything() if groups is None
                                else Access.of(SERVICE_SUBJECT, groups))
        self._secret = s.jwt.secret.get_secret_value().encode() if s.jwt.secret else b""
        self._keys = _public_keys(s)
        self._users = bool(self._secret or self._keys)
        self._audience, self._issuer = s.jwt.audience, s.jwt.issuer
        self._claim, self._leeway = s.jwt.groups_claim, s.jwt.leeway_s
        self._on_ignored = on_ignored

    @property
    def open(self) -> bool:
        return not self._service and not self._users

    def verify_metadata(self, metadata: Sequence[tuple[str, str | bytes]]) -> Principal:
        """The principal of a call's metadata: its one authorization header's. Two headers
        are refused rather than one chosen: `svc` then `carol` must not read as either."""
        if self.open:
            return OPEN_PRINCIPAL
        sent = [value for key, value in metadata if key.lower() == "authorization"]
        if len(sent) > 1:
            raise AuthError("ambiguous_token",
                            f"{len(sent)} authorization headers; send exactly one")
        return self.verify(sent[0] if sent else "")

    def verify(self, authorization: str | bytes) -> Principal:
        if self.open:
            return OPEN_PRINCIPAL
        sent = authorization.encode("latin-1", "replace") if isinstance(authorization, str) \
            else bytes(authorization)
        if not sent:
            raise AuthError("missing_token", "no authorization header")
        if self._service and hmac.compare_digest(sent, self._service):  # constant time
            return Principal(SERVICE_SUBJECT, SERVICE, self._service_access)
        scheme, _, token = sent.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            raise AuthError("malformed_header", "the header is not 'Bearer <token>'")
        if not self._users:
            raise AuthError("wrong_token", "not the service account's token")
        return self._user(token.strip())

    def _user(self, raw: bytes) -> Principal:
        if len(raw) > MAX_TOKEN_CHARS:
            raise AuthError("token_too_large", f"longer than {MAX_TOKEN_CHARS} characters")
        try:
            token = raw.decode("ascii")
            header = jwt.get_unverified_header(token)
        except (UnicodeDecodeError, jwt.InvalidTokenError) as exc:
            raise AuthError("malformed_token", "neither the service token nor a JWT") from exc
        alg, key = self._key_for(header)
        required = ["exp", "sub", "aud", *(["iss"] if self._issuer else [])]
        try:
            claims = jwt.decode(token, key, algorithms=[alg], audience=self._audience,
                                issuer=self._issuer, leeway=self._leeway,
                                options={"require": required, "verify_signature": True,
                                         "verify_exp": True, "verify_aud": True,
                                         "verify_iss": self._issuer is not None})
        except jwt.InvalidTokenError as exc:
            raise _refusal(exc) from exc
        except Exception as exc:  # a library's stumble over a crafted token is still a refusal
            raise AuthError("malformed_token", f"unreadable ({type(exc).__name__})") from exc
        return self._principal(claims)

    def _key_for(self, header: dict[str, Any]) -> tuple[str, Any]:
        """The one key a token may be checked with: an HS token only against the secret, an
        RS/ES token only against a public key of that algorithm (no confusion either way)."""
        alg, allowed = header.get("alg"), self._algorithms()
        if not isinstance(alg, str) or alg not in allowed:
            raise AuthError("algorithm_not_allowed", f"allowed: {', '.join(allowed)}")
        if alg in SECRET_ALGORITHMS:
            return alg, self._secret
        kid = header.get("kid")
        fits = [(k, key) for k, (a, key) in self._keys.items() if a == alg]
        chosen = [key for k, key in fits if k == kid] if isinstance(kid, str) and kid else []
        if not chosen and len(fits) == 1 and not kid:
            chosen = [fits[0][1]]
        if len(chosen) != 1:
            raise AuthError("unknown_key", f"no {alg} key configured for this token")
        return alg, chosen[0]

    def _algorithms(self) -> list[str]:
        return ([*SECRET_ALGORITHMS] if self._secret else []) + sorted(
            {a for a, _ in self._keys.values()})

    def _principal(self, claims: dict[str, Any]) -> Principal:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not 0 < len(subject) <= MAX_SUBJECT_CHARS:
            raise AuthError("bad_subject", f"sub must be 1..{MAX_SUBJECT_CHARS} characters")
        found = claims.get(self._claim, [])
        if not isinstance(found, list) or not all(isinstance(g, str) for g in found):
            # A nested list or an object is not a group the IdP meant to grant; dropping it
            # would serve a token whose claim nobody reads the same way.
            raise AuthError("bad_groups", f"the {self._claim} claim is not a list of strings")
        groups, ignored = usable_groups(found)
        if ignored and self._on_ignored is not None:
            self._on_ignored(ignored)
        return Principal(subject, USER, Access.of(subject, groups))


def usable_groups(claimed: Iterable[object]) -> tuple[list[str], int]:
    """The claimed groups that are label names (not `user:` labels, which only `sub`
    grants), at most MAX_GROUPS, and how many others were dropped."""
    items = list(claimed)
    kept = sorted({g for g in items if isinstance(g, str) and LABEL.fullmatch(g)
                   and not g.startswith(USER_PREFIX)})[:MAX_GROUPS]
    return kept, len(items) - len(kept)


def _refusal(exc: jwt.InvalidTokenError) -> AuthError:
    """A precise reason for PyJWT's refusal; its message is not passed on."""
    kinds: list[tuple[type[Exception], str, str]] = [
        (jwt.ExpiredSignatureError, "expired", "the token has expired (exp)"),
        (jwt.ImmatureSignatureError, "not_yet_valid", "the token is not valid yet (nbf/iat)"),
        (jwt.InvalidAudienceError, "wrong_audience", "the token is not for this audience"),
        (jwt.InvalidIssuerError, "wrong_issuer", "the token is not from the trusted issuer"),
        (jwt.InvalidSignatureError, "bad_signature", "the signature does not verify"),
        (jwt.InvalidAlgorithmError, "algorithm_not_allowed", "the algorithm is not allowed"),
        (jwt.InvalidKeyError, "unknown_key", "no usable key for this token"),
    ]
    if isinstance(exc, InvalidSubjectError):
        return AuthError("bad_subject", "sub must be a string")
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return AuthError("missing_claim", f"the token has no {exc.claim} claim")
    for kind, reason, detail in kinds:
        if isinstance(exc, kind):
            return AuthError(reason, detail)
    return AuthError("malformed_token", "the token could not be read")


def _public_keys(s: InferenceSettings) -> dict[str | None, tuple[str, Any]]:
    """kid (None for the PEM key) -> (algorithm, key); a key of another kind fails at start."""
    keys: dict[str | None, tuple[str, Any]] = {}
    if s.jwt.public_key is not None:
        key = load_pem_public_key(s.jwt.public_key.read_bytes())
        keys[None] = (_pem_algorithm(key), key)
    if s.jwt.jwks is not None:
        found = jwt.PyJWKSet.from_dict(json.loads(s.jwt.jwks.read_text(encoding="utf-8")))
        for i, jwk in enumerate(found.keys):
            if jwk.algorithm_name not in KEY_ALGORITHMS:
                msg = (f"STREAMRAG_INFERENCE_JWT_JWKS: key {i} is {jwk.algorithm_name}; only "
                       f"{', '.join(KEY_ALGORITHMS)} public keys")
                raise ValueError(msg)
            keys[jwk.key_id or f"#{i}"] = (jwk.algorithm_name, jwk.key)
    return keys


def _pem_algorithm(key: Any) -> str:
    if isinstance(key, rsa.RSAPublicKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return "ES256"
    raise ValueError("STREAMRAG_INFERENCE_JWT_PUBLIC_KEY: an RSA or EC P-256 public key")


DeniedSink = Callable[[str], None]  # the reason of one refused call


class Authenticator(grpc.aio.ServerInterceptor):
    """Verifies every call but health checks; an Inference handler runs with its
    principal bound (principal.current())."""

    def __init__(self, verifier: TokenVerifier, on_denied: DeniedSink | None = None) -> None:
        self.verifier, self.on_denied = verifier, on_denied

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith(OPEN_PREFIXES):
            return handler
        try:
            principal = self.verifier.verify_metadata(tuple(details.invocation_metadata or ()))
        except AuthError as exc:
            if self.on_denied is not None:
                self.on_denied(exc.reason)
            log.info("refused %s: %s", details.method, exc.reason)
            return _denied(handler, exc)
        if not details.method.startswith(BOUND_PREFIX):
            return handler  # reflection: no search, nothing to scope
        return _bound(handler, principal)


def _kinds(handler: Any) -> tuple[Callable[..., Any], Any]:
    """The handler's behaviour and the factory of a handler of the same kind."""
    for attr, factory in (("unary_unary", grpc.unary_unary_rpc_method_handler),
                          ("unary_stream", grpc.unary_stream_rpc_method_handler),
                          ("stream_unary", grpc.stream_unary_rpc_method_handler)):
        if getattr(handler, attr):
            return getattr(handler, attr), factory
    return handler.stream_stream, grpc.stream_stream_rpc_method_handler


def _bound(handler: Any, principal: Principal) -> Any:
    """A handler of the same shape whose behaviour runs with `principal` current."""
    behaviour, factory = _kinds(handler)
    kw = {"request_deserializer": handler.request_deserializer,
          "response_serializer": handler.response_serializer}
    if handler.unary_stream or handler.stream_stream:
        async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with bound(principal):
                async for response in behaviour(request, context):
                    yield response
        return factory(stream, **kw)

    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with bound(principal):
            return await behaviour(request, context)
    return factory(call, **kw)


def _denied(handler: Any, refusal: AuthError) -> Any:
    """A handler of the same shape as `handler` that answers UNAUTHENTICATED."""
    details = (f"{refusal.reason}: {refusal.detail}; send a valid bearer token "
               "('authorization: Bearer <token>')")
    behaviour, factory = _kinds(handler)
    del behaviour

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, details,
                            trailing_metadata=(("streamrag-reason", refusal.reason),))

    return factory(deny, request_deserializer=handler.request_deserializer,
                   response_serializer=handler.response_serializer)
