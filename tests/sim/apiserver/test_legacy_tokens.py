"""Legacy ServiceAccount tokens over HTTP, as kube-apiserver with ``--service-account-key-file`` treats them:
signature against the configured keys, the legacy validator's lookups and words, the invalid-since refusal,
the auto-generated-token Warning, daily last-used stamping, and the tracking ConfigMap written at start-up."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from controller_manager.api.resources import CONFIGMAPS, SECRETS, SERVICEACCOUNTS
from controller_manager.clock import FakeClock
from controller_manager.controllers.serviceaccounttoken.jwt import TokenGenerator, legacy_claims
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.apiserver.auth.legacy_tokens import load_public_keys
from tests.sim.apiserver.conftest import Client

AUTHN = "/apis/authentication.k8s.io/v1"
LAST_USED = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE = "kubernetes.io/legacy-token-invalid-since"


@pytest.fixture
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def key_file(tmp_path: Path, key: rsa.RSAPrivateKey) -> Path:
    path = tmp_path / "sa.pub"
    path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def install(api: ApiServer, generator: TokenGenerator, *, referenced: bool = False,
            labels: dict[str, str] | None = None) -> str:
    """A ServiceAccount ``robot`` and its token Secret holding a signed legacy token; the token."""
    sa = api.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"},
                                      **({"secrets": [{"name": "robot-token"}]} if referenced else {})}, "default")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
              "metadata": {"name": "robot-token", "labels": labels or {},
                           "annotations": {"kubernetes.io/service-account.name": "robot",
                                           "kubernetes.io/service-account.uid": sa["metadata"]["uid"]}}}
    token = generator.generate(legacy_claims(sa, secret))
    api.create(SECRETS, {**secret, "data": {"token": b64(token.encode())}}, "default")
    return token


async def review(client: Client, token: str) -> dict[str, Any]:
    code, body = await client.post(f"{AUTHN}/tokenreviews", {"apiVersion": "authentication.k8s.io/v1",
                                                              "kind": "TokenReview", "spec": {"token": token}})
    assert code == 201
    return dict(body["status"])


async def whoami(client: Client, token: str) -> tuple[int, Any, list[str]]:
    resp = await client.tc.post(f"{AUTHN}/selfsubjectreviews", json={
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        headers={"Authorization": f"Bearer {token}"})
    return resp.status, await resp.json(), resp.headers.getall("Warning", [])


async def test_a_legacy_token_authenticates_and_is_marked_used(api: ApiServer, client: Client, key_file: Path,
                                                               key: rsa.RSAPrivateKey, clock: FakeClock) -> None:
    assert api.auth is not None
    api.auth.use_service_account_key_files([str(key_file)])
    token = install(api, TokenGenerator(key))
    code, body, warnings = await whoami(client, token)
    assert code == 201
    assert body["status"]["userInfo"]["username"] == "system:serviceaccount:default:robot"
    assert warnings == []  # a manually created token Secret: no warning
    today = datetime.fromtimestamp(clock.now(), UTC).strftime("%Y-%m-%d")
    secret = api.get(SECRETS, "default", "robot-token")
    assert secret["metadata"]["labels"][LAST_USED] == today
    rv = secret["metadata"]["resourceVersion"]
    await whoami(client, token)
    assert api.get(SECRETS, "default", "robot-token")["metadata"]["resourceVersion"] == rv  # once a day
    clock.advance(timedelta(days=1).total_seconds())
    await whoami(client, token)
    tomorrow = datetime.fromtimestamp(clock.now(), UTC).strftime("%Y-%m-%d")
    assert api.get(SECRETS, "default", "robot-token")["metadata"]["labels"][LAST_USED] == tomorrow
    status = await review(client, token)
    assert status["authenticated"] is True
    assert status["audiences"] == ["https://kubernetes.default.svc.cluster.local"]


async def test_without_the_key_a_legacy_token_is_unknown(api: ApiServer, client: Client,
                                                         key: rsa.RSAPrivateKey) -> None:
    token = install(api, TokenGenerator(key))
    assert (await whoami(client, token))[0] == 401


async def test_a_token_signed_by_another_key_is_refused(api: ApiServer, client: Client, key_file: Path) -> None:
    assert api.auth is not None
    api.auth.use_service_account_key_files([str(key_file)])
    token = install(api, TokenGenerator(ec.generate_private_key(ec.SECP256R1())))
    assert (await whoami(client, token))[0] == 401


async def test_an_auto_generated_token_draws_the_warning(api: ApiServer, client: Client, key_file: Path,
                                                         key: rsa.RSAPrivateKey) -> None:
    assert api.auth is not None
    api.auth.use_service_account_key_files([str(key_file)])
    token = install(api, TokenGenerator(key), referenced=True)
    code, _, warnings = await whoami(client, token)
    assert code == 201
    assert warnings == ['299 - "Use tokens from the TokenRequest API or manually created secret-based tokens '
                        'instead of auto-generated secret-based tokens."']


@pytest.mark.parametrize("change", ["delete-secret", "other-token", "recreate-sa", "invalid-since"])
async def test_the_legacy_validator_refuses(api: ApiServer, client: Client, key_file: Path,
                                            key: rsa.RSAPrivateKey, change: str) -> None:
    assert api.auth is not None
    api.auth.use_service_account_key_files([str(key_file)])
    token = install(api, TokenGenerator(key))
    if change == "delete-secret":
        api.delete(SECRETS, "default", "robot-token")
        expected = "[invalid bearer token, Token has been invalidated]"
    elif change == "other-token":
        api.patch(SECRETS, "default", "robot-token", {"data": {"token": b64(b"something else")}}, "merge")
        expected = "[invalid bearer token, Token does not match server's copy]"
    elif change == "recreate-sa":
        old = api.get(SERVICEACCOUNTS, "default", "robot")["metadata"]["uid"]
        api.delete(SERVICEACCOUNTS, "default", "robot")
        new = api.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                           "metadata": {"name": "robot"}}, "default")["metadata"]["uid"]
        expected = f"[invalid bearer token, ServiceAccount UID ({new}) does not match claim ({old})]"
    else:
        api.patch(SECRETS, "default", "robot-token", {"metadata": {"labels": {INVALID_SINCE: "2023-01-01"}}},
                  "merge")
        expected = ("[invalid bearer token, the token in secret default/robot-token for service account "
                    "default/robot has been marked invalid. Use tokens from the TokenRequest API or manually created "
                    "secret-based tokens, or remove the 'kubernetes.io/legacy-token-invalid-since' label from the "
                    "secret to temporarily allow use of this token]")
    status = await review(client, token)
    assert status.get("authenticated") is not True
    assert status["error"] == expected
    assert (await whoami(client, token))[0] == 401
    if change == "invalid-since":  # the refused use is still recorded
        assert LAST_USED in api.get(SECRETS, "default", "robot-token")["metadata"]["labels"]


def test_the_tracking_config_map_is_written_at_start(api: ApiServer, clock: FakeClock) -> None:
    cm = api.get(CONFIGMAPS, "kube-system", "kube-apiserver-legacy-service-account-token-tracking")
    assert cm["data"] == {"since": datetime.fromtimestamp(clock.now(), UTC).strftime("%Y-%m-%d")}


def test_key_files_give_public_keys_from_keys_and_certificates(tmp_path: Path, key: rsa.RSAPrivateKey) -> None:
    private = tmp_path / "sa.key"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    empty = tmp_path / "empty.pem"
    empty.write_text("nothing here\n")
    [public] = load_public_keys([str(private)])
    assert public.public_numbers() == key.public_key().public_numbers()  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="does not contain any valid RSA or ECDSA public keys"):
        load_public_keys([str(empty)])


async def test_the_keys_are_published_with_the_issuer_discovery(api: ApiServer, client: Client, key_file: Path,
                                                                key: rsa.RSAPrivateKey) -> None:
    assert api.auth is not None
    api.auth.use_service_account_key_files([str(key_file)])
    code, doc = await client.get("/.well-known/openid-configuration")
    assert code == 200
    assert doc["id_token_signing_alg_values_supported"] == ["ES256", "RS256"]
    code, jwks = await client.get("/openid/v1/jwks")
    assert code == 200
    rsa_keys = [k for k in jwks["keys"] if k["kty"] == "RSA"]
    assert len(rsa_keys) == 1
    numbers = key.public_key().public_numbers()
    assert int.from_bytes(base64.urlsafe_b64decode(rsa_keys[0]["n"] + "=="), "big") == numbers.n
    assert rsa_keys[0]["e"] == "AQAB"
    assert rsa_keys[0]["kid"] == TokenGenerator(key).kid  # the kid the controller's tokens carry
