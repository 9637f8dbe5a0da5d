"""The authenticator: which tokens make which principal, and that everything else is refused
UNAUTHENTICATED with a reason that never quotes what was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.inference.api.auth import AuthError, TokenVerifier, usable_groups
from services.inference.api.principal import (
    ANONYMOUS_PRINCIPAL,
    OPEN_PRINCIPAL,
    SERVICE,
    USER,
    bound,
    current,
)
from services.inference.settings import InferenceSettings
from shared.contract.access import Access
from tests.support.tokens import (
    AUDIENCE,
    SECRET,
    claims,
    ec_key,
    hs256,
    hs256_with,
    jwks,
    public_pem,
    rsa_key,
    unsigned,
)

REASONS = {"missing_token", "malformed_header", "wrong_token", "malformed_token",
           "algorithm_not_allowed", "unknown_key", "expired", "not_yet_valid",
           "wrong_audience", "wrong_issuer", "bad_signature", "missing_claim", "bad_subject",
           "bad_groups", "token_too_large", "ambiguous_token"}
RSA = rsa_key()
EC = ec_key()


def verifier(ignored: list[int] | None = None, **kw: Any) -> TokenVerifier:
    base: dict[str, Any] = {"jwt_secret": SECRET, "jwt_audience": AUDIENCE}
    sink = None if ignored is None else ignored.append
    return TokenVerifier(InferenceSettings(**{**base, **kw}), sink)


def refusal(v: TokenVerifier, header: str) -> str:
    with pytest.raises(AuthError) as err:
        v.verify(header)
    return err.value.reason


def test_a_user_token_names_its_subject_and_its_groups() -> None:
    dropped: list[int] = []
    who = verifier(dropped).verify(
        "Bearer " + hs256("ann", ["payments", "ops", "bad label!", "user:bob"]))
    assert (who.subject, who.kind) == ("ann", USER)
    assert who.access == Access(frozenset({"payments", "ops", "public", "user:ann"}))
    # A name outside the grammar and a user: label (only sub grants one):
    assert dropped == [2]


@pytest.mark.parametrize("groups", [[["eng"]], ["eng", ["ops"]], [{"name": "eng"}], [7],
                                    ["eng", None], [True], "eng", {"eng": True}, None])
def test_a_groups_claim_that_is_not_a_list_of_strings_refuses_the_token(groups: Any) -> None:
    """As documented (bad_groups): a nested list is not read as its members, nor dropped
    while the rest of the token is served."""
    dropped: list[int] = []
    token = jwt.encode({**claims("ann"), "groups": groups}, SECRET, algorithm="HS256")
    assert refusal(verifier(dropped), "Bearer " + token) == "bad_groups"
    assert dropped == []


def test_more_than_one_authorization_header_is_ambiguous_whatever_the_order() -> None:
    v = verifier(auth_token="s3rvice-token")
    carol = ("authorization", "Bearer " + hs256("carol", ["hr"]))
    service = ("authorization", "Bearer s3rvice-token")
    for metadata in ([service, carol], [carol, service], [carol, carol],
                     [service, ("Authorization", "Bearer s3rvice-token")]):
        with pytest.raises(AuthError) as err:
            v.verify_metadata(metadata)
        assert err.value.reason == "ambiguous_token"
        assert "s3rvice" not in str(err.value) and "carol" not in str(err.value)
    assert v.verify_metadata([("user-agent", "x"), service]).kind == SERVICE
    assert v.verify_metadata([carol]).subject == "carol"
    assert refusal_of_metadata(v, [("user-agent", "x")]) == "missing_token"
    # Open: nothing is verified, so nothing is ambiguous either.
    assert TokenVerifier(InferenceSettings()).verify_metadata([carol, service]) \
        == OPEN_PRINCIPAL


def refusal_of_metadata(v: TokenVerifier, metadata: list[tuple[str, str]]) -> str:
    with pytest.raises(AuthError) as err:
        v.verify_metadata(metadata)
    return err.value.reason


def test_a_token_without_groups_reads_only_public_and_its_own() -> None:
    who = verifier().verify("Bearer " + hs256("cy"))
    assert who.access.grants == {"public", "user:cy"} and not who.access.all_access
    assert who.access.admits(("public",)) and who.access.admits(("user:cy",))
    assert not who.access.admits(("payments",)) and not who.access.admits(())


def test_usable_groups_never_keeps_a_user_label_or_a_non_name() -> None:
    assert usable_groups(["b", "a", "a", "user:x", "", "x y", None]) == (["a", "b"], 5)


@pytest.mark.parametrize(("token", "reason"), [
    (hs256("ann", exp_in=-120), "expired"),  # past the 30 s leeway
    (hs256("ann", aud="another-service"), "wrong_audience"),
    (hs256("ann", aud=None), "missing_claim"),
    (hs256("ann", exp_in=None), "missing_claim"),
    (hs256(None), "missing_claim"),
    (hs256("ann", secret="another-secret-of-thirty-two-bytes-or-more"), "bad_signature"),
    (hs256("ann", exp_in=300, nbf=int(2e9)), "not_yet_valid"),
    (unsigned(claims("ann")), "algorithm_not_allowed"),
    (jwt.encode(claims("ann"), SECRET, algorithm="HS512"), "algorithm_not_allowed"),
    (jwt.encode({**claims("ann"), "groups": "payments"}, SECRET, algorithm="HS256"),
     "bad_groups"),
    (jwt.encode(claims("ann"), RSA, algorithm="RS256"), "algorithm_not_allowed"),
    ("not-a-jwt", "malformed_token"),
    ("a.b.c", "malformed_token"),
])
def test_bad_tokens_are_refused_with_their_reason(token: str, reason: str) -> None:
    v = verifier()
    assert refusal(v, "Bearer " + token) == reason
    with pytest.raises(AuthError) as err:
        v.verify("Bearer " + token)
    assert token not in str(err.value)  # the reason names the fault, never the token


def test_a_token_a_little_past_exp_is_within_the_leeway() -> None:
    assert verifier().verify("Bearer " + hs256("ann", exp_in=-5)).subject == "ann"
    assert refusal(verifier(jwt_leeway_s=0), "Bearer " + hs256("ann", exp_in=-5)) == "expired"


def test_missing_and_malformed_headers() -> None:
    v = verifier()
    assert refusal(v, "") == "missing_token"
    assert refusal(v, "Basic dXNlcjpwYXNz") == "malformed_header"
    assert refusal(v, "Bearer ") == "malformed_header"
    assert refusal(v, "Bearer " + "a" * 20_000) == "token_too_large"


def test_the_issuer_is_checked_when_set() -> None:
    v = verifier(jwt_issuer="https://idp.example")
    assert refusal(v, "Bearer " + hs256("ann", iss="https://evil.example")) == "wrong_issuer"
    assert refusal(v, "Bearer " + hs256("ann")) == "missing_claim"
    assert v.verify("Bearer " + hs256("ann", iss="https://idp.example")).subject == "ann"


def test_rs256_and_es256_verify_with_a_public_key_and_a_jwks_file(tmp_path: Path) -> None:
    (tmp_path / "rsa.pem").write_bytes(public_pem(RSA))
    (tmp_path / "keys.json").write_text(jwks(("ec-1", "ES256", EC)))
    v = TokenVerifier(InferenceSettings(jwt_public_key=tmp_path / "rsa.pem",
                                        jwt_jwks=tmp_path / "keys.json", jwt_audience=AUDIENCE))
    by_rsa = jwt.encode(claims("ann", ["payments"]), RSA, algorithm="RS256")
    assert v.verify("Bearer " + by_rsa).access.grants == {"payments", "public", "user:ann"}
    by_ec = jwt.encode(claims("bob", ["hr"]), EC, algorithm="ES256", headers={"kid": "ec-1"})
    assert v.verify("Bearer " + by_ec).subject == "bob"
    other = jwt.encode(claims("ann"), rsa_key(), algorithm="RS256")
    assert refusal(v, "Bearer " + other) == "bad_signature"
    unknown = jwt.encode(claims("bob"), EC, algorithm="ES256", headers={"kid": "ec-2"})
    assert refusal(v, "Bearer " + unknown) == "unknown_key"
    # No secret configured: an HS256 token is not even tried.
    assert refusal(v, "Bearer " + hs256("ann")) == "algorithm_not_allowed"


def test_the_public_key_is_never_an_hmac_secret(tmp_path: Path) -> None:
    """RS/HS confusion: a token 'signed' HS256 with the public key (which anyone has)."""
    pem = public_pem(RSA)
    (tmp_path / "rsa.pem").write_bytes(pem)
    forged = hs256_with(claims("mallory", ["payments"]), pem)
    only_key = TokenVerifier(InferenceSettings(jwt_public_key=tmp_path / "rsa.pem",
                                               jwt_audience=AUDIENCE))
    assert refusal(only_key, "Bearer " + forged) == "algorithm_not_allowed"
    both = TokenVerifier(InferenceSettings(jwt_public_key=tmp_path / "rsa.pem",
                                           jwt_secret=SECRET, jwt_audience=AUDIENCE))
    assert refusal(both, "Bearer " + forged) == "bad_signature"  # checked with the secret


def test_a_jwks_file_of_a_symmetric_key_fails_at_start(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text(
        '{"keys": [{"kty": "oct", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "kid": "s"}]}')
    with pytest.raises(ValueError, match="JWT_JWKS"):
        TokenVerifier(InferenceSettings(jwt_jwks=tmp_path / "keys.json",
                                        jwt_audience=AUDIENCE))


def test_the_service_account_and_users_side_by_side() -> None:
    v = verifier(auth_token="s3rvice-token")
    service = v.verify("Bearer s3rvice-token")
    assert (service.subject, service.kind, service.access) == ("service", SERVICE,
                                                               Access.everything())
    assert v.verify("Bearer " + hs256("ann")).kind == USER
    restricted = verifier(auth_token="s3rvice-token", service_account_groups=["ops"])
    assert restricted.verify("Bearer s3rvice-token").access == Access.of("service", ["ops"])
    alone = TokenVerifier(InferenceSettings(auth_token="s3rvice-token"))
    assert refusal(alone, "Bearer other") == "wrong_token"
    assert refusal(alone, "Bearer " + hs256("ann")) == "wrong_token"


def test_with_nothing_configured_every_caller_reads_everything() -> None:
    v = TokenVerifier(InferenceSettings())
    assert v.open
    assert v.verify("") == v.verify("Bearer whatever") == OPEN_PRINCIPAL
    assert OPEN_PRINCIPAL.access == Access.everything()


def test_settings_refuse_a_key_without_audience_and_bad_groups() -> None:
    with pytest.raises(ValidationError, match="JWT_AUDIENCE"):
        InferenceSettings(jwt_secret=SECRET)
    with pytest.raises(ValidationError, match="at least 32"):
        InferenceSettings(jwt_secret="short-secret", jwt_audience=AUDIENCE)
    with pytest.raises(ValidationError, match="SERVICE_ACCOUNT_GROUPS"):
        InferenceSettings(auth_token="t", service_account_groups=["not a name"])


def test_the_principal_is_bound_for_the_block_only() -> None:
    assert current() == ANONYMOUS_PRINCIPAL  # fail closed outside a call
    assert not current().access.all_access
    with bound(OPEN_PRINCIPAL):
        assert current() == OPEN_PRINCIPAL
    assert current() == ANONYMOUS_PRINCIPAL


texts = st.text(max_size=300)
segments = st.lists(st.one_of(texts, st.binary(max_size=200).map(
    lambda b: jwt.utils.base64url_encode(b).decode())), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    texts,
    texts.map(lambda t: "Bearer " + t),
    segments.map(lambda parts: "Bearer " + ".".join(parts)),
    st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), texts,
                                                   st.lists(texts, max_size=3)),
                    max_size=6).map(lambda h: "Bearer " + ".".join((
                        jwt.utils.base64url_encode(repr(h).replace("'", '"').encode())
                        .decode(), "e30", "sig"))),
))
def test_garbage_is_always_unauthenticated_never_an_exception(header: str) -> None:
    v = verifier(auth_token="s3rvice-token")
    try:
        who = v.verify(header)
    except AuthError as exc:
        assert exc.reason in REASONS
        token = header.removeprefix("Bearer ")
        if len(token) >= 16:
            assert token not in str(exc)
        return
    # Only the service token itself gets in (a random draw cannot forge a signature).
    assert header == "Bearer s3rvice-token" and who.kind == SERVICE


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "inference.internal"])
def test_an_open_server_on_a_network_address_is_refused_unless_meant(host: str) -> None:
    with pytest.raises(ValueError, match="OPEN_NETWORK_OK"):
        InferenceSettings(grpc_host=host)
    for guarded in ({"auth_token": "s3rvice-token"}, {"open_network_ok": True},
                    {"jwt_secret": "k" * 32, "jwt_audience": "rag"}):
        assert InferenceSettings(grpc_host=host, **guarded).grpc_host == host  # type: ignore[arg-type]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.9.9", "localhost", "::1", "[::1]"])
def test_an_open_server_on_loopback_needs_nothing(host: str) -> None:
    assert TokenVerifier(InferenceSettings(grpc_host=host)).open


def test_an_empty_service_token_is_refused_and_empty_jwt_variables_are_unset() -> None:
    with pytest.raises(ValueError, match="AUTH_TOKEN"):
        InferenceSettings(auth_token=" ")
    settings = InferenceSettings(jwt_secret="", jwt_audience="", jwt_issuer="")
    assert not settings.jwt_configured() and TokenVerifier(settings).open
