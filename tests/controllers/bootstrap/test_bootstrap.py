"""The bootstrap signer and token cleaner against a recording fake client: upstream's bootstrapsigner_test.go,
tokencleaner_test.go and cluster-bootstrap's jws_test.go, plus the bootstrap token Secret helpers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from controller_manager.api.meta import format_time, key_of
from controller_manager.clock import FakeClock
from controller_manager.controllers.bootstrap import (
    BootstrapSigner,
    TokenCleaner,
    compute_detached_signature,
    detached_token_is_valid,
)
from controller_manager.controllers.bootstrap.secrets import get_expiration, parse_name, validate_secret_for_signing
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, SharedInformerFactory
from tests.controllers.serviceaccounttoken.fake import Action, FakeClient

Obj = dict[str, Any]
NOW = 1_700_000_000.0
TEST_TOKEN_ID = "abc123"
SIGNATURE = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiYzEyMyJ9..QSxpUG7Q542CirTI2ECPSZjvBOJURUW5a7XqFpNI958"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def token_secret(token_id: str, token_secret: str, **extra: str) -> Obj:
    data = {"token-id": token_id, "token-secret": token_secret, **extra}
    return {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": {"namespace": "kube-system", "name": f"bootstrap-token-{token_id}", "resourceVersion": "1",
                         "uid": f"uid-{token_id}"},
            "data": {k: b64(v) for k, v in data.items()}}


def signing(secret: Obj, value: str = "true") -> Obj:
    secret["data"]["usage-bootstrap-signing"] = b64(value)
    return secret


def expiring(secret: Obj, seconds: float) -> Obj:
    secret["data"]["expiration"] = b64(format_time(NOW + seconds))
    return secret


def config_map(token_id: str = "", signature: str = "") -> Obj:
    cm: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": "kube-public", "name": "cluster-info", "resourceVersion": "1"},
               "data": {"kubeconfig": "payload"}}
    if token_id:
        cm["data"][f"jws-kubeconfig-{token_id}"] = signature
    return cm


def context(client: FakeClient) -> ControllerContext:
    clock = FakeClock(NOW)
    return ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                             clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]


def update(cm: Obj) -> Action:
    return Action("update", "configmaps", "kube-public", "cluster-info", cm)


# --- jws (k8s.io/cluster-bootstrap/token/jws) ---------------------------------------------------------------

CONTENT = "Hello from the other side. I must have called a thousand times."
SECRET = "my voice is my passcode. my voice is my passcode"
ID = "joshua"


@pytest.mark.parametrize(("content", "expected"), [
    (CONTENT, "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..SFoKn0-YxqnvpSExt4LuCZ_7pvIBdX3SoUO_NsTpkdg"),
    ("", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..kzZha466Sbz_vFhUBjjYp2rl3F7yHgdDdUIBGxQg4js"),
])
def test_compute_detached_signature(content: str, expected: str) -> None:
    assert compute_detached_signature(content, ID, SECRET) == expected


def test_detached_token_is_valid() -> None:
    sig = "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..SFoKn0-YxqnvpSExt4LuCZ_7pvIBdX3SoUO_NsTpkdg"
    assert detached_token_is_valid(sig, CONTENT, ID, SECRET)
    assert not detached_token_is_valid(sig + "foo", CONTENT, ID, SECRET)
    assert not detached_token_is_valid(sig, CONTENT + ".", ID, SECRET)


# --- the bootstrap token Secret helpers ------------------------------------------------------------------

@pytest.mark.parametrize(("name", "token_id"), [
    ("bootstrap-token-abc123", "abc123"), ("bootstrap-token-abc12", None), ("bootstrap-token-ABC123", None),
    ("bootstrap-token-abc1234", None), ("token-abc123", None), ("bootstrap-token-", None),
])
def test_parse_name(name: str, token_id: str | None) -> None:
    assert parse_name(name) == token_id


def test_expiration() -> None:
    assert get_expiration(token_secret("abc123", "s"), NOW) == (0.0, False)
    assert get_expiration(expiring(token_secret("abc123", "s"), 3600), NOW) == (3600.0, False)
    assert get_expiration(expiring(token_secret("abc123", "s"), 0), NOW) == (0.0, True)
    assert get_expiration(expiring(token_secret("abc123", "s"), -1), NOW) == (0.0, True)
    bad = token_secret("abc123", "s", expiration="tomorrow")
    assert get_expiration(bad, NOW) == (0.0, True)  # unparseable: treated as expired


@pytest.mark.parametrize(("secret", "valid"), [
    (signing(token_secret("abc123", "s")), ("abc123", "s")),
    (token_secret("abc123", "s"), None),  # not for signing
    (signing(token_secret("abc123", "s"), "false"), None),
    (signing(token_secret("abc123", "")), None),  # no secret
    (signing(expiring(token_secret("abc123", "s"), -60)), None),
    (signing(expiring(token_secret("abc123", "s"), 60)), ("abc123", "s")),
    ({**signing(token_secret("abc123", "s")), "metadata": {"name": "bootstrap-token-xyz789"}}, None),  # id mismatch
])
def test_validate_secret_for_signing(secret: Obj, valid: tuple[str, str] | None) -> None:
    assert validate_secret_for_signing(secret, NOW) == valid


# --- the bootstrap signer (bootstrapsigner_test.go) -------------------------------------------------------

def new_signer(client: FakeClient) -> BootstrapSigner:
    return BootstrapSigner(context(client))


def put(store: Any, obj: Obj) -> None:
    store._put(key_of(obj), obj)


async def test_no_config_map() -> None:
    client = FakeClient()
    await new_signer(client).sign_config_map()
    assert client.actions == []


async def test_simple_sign() -> None:
    client = FakeClient()
    client.add("configmaps", config_map())
    signer = new_signer(client)
    put(signer.cm_informer.store, config_map())
    put(signer.secret_informer.store, signing(token_secret(TEST_TOKEN_ID, "tokenSecret")))
    await signer.sign_config_map()
    assert client.actions == [update(config_map(TEST_TOKEN_ID, SIGNATURE))]


async def test_no_sign_needed() -> None:
    client = FakeClient()
    signer = new_signer(client)
    put(signer.cm_informer.store, config_map(TEST_TOKEN_ID, SIGNATURE))
    put(signer.secret_informer.store, signing(token_secret(TEST_TOKEN_ID, "tokenSecret")))
    await signer.sign_config_map()
    assert client.actions == []


async def test_update_signature() -> None:
    client = FakeClient()
    client.add("configmaps", config_map())
    signer = new_signer(client)
    put(signer.cm_informer.store, config_map(TEST_TOKEN_ID, "old signature"))
    put(signer.secret_informer.store, signing(token_secret(TEST_TOKEN_ID, "tokenSecret")))
    await signer.sign_config_map()
    assert client.actions == [update(config_map(TEST_TOKEN_ID, SIGNATURE))]


async def test_remove_signature() -> None:
    client = FakeClient()
    client.add("configmaps", config_map())
    signer = new_signer(client)
    put(signer.cm_informer.store, config_map(TEST_TOKEN_ID, "old signature"))
    await signer.sign_config_map()
    assert client.actions == [update(config_map())]


async def test_only_kube_system_bootstrap_tokens_and_cluster_info_enqueue() -> None:
    signer = new_signer(FakeClient())
    elsewhere = signing(token_secret(TEST_TOKEN_ID, "tokenSecret"))
    elsewhere["metadata"] = {**elsewhere["metadata"], "namespace": "default"}
    signer._on_secret(Added(elsewhere))
    signer._on_config_map(Added({**config_map(), "metadata": {"namespace": "default", "name": "cluster-info"}}))
    assert len(signer.queue) == 0
    signer._on_secret(Added(token_secret(TEST_TOKEN_ID, "tokenSecret")))
    assert len(signer.queue) == 1
    signer.queue.shut_down()


# --- the token cleaner (tokencleaner_test.go) -------------------------------------------------------------

def delete(secret: Obj) -> Action:
    return Action("delete", "secrets", "kube-system", secret["metadata"]["name"], {"uid": secret["metadata"]["uid"]})


async def clean(secret: Obj) -> tuple[FakeClient, TokenCleaner, Any]:
    client = FakeClient()
    client.add("secrets", secret)
    cleaner = TokenCleaner(context(client))
    put(cleaner.secret_informer.store, secret)
    result = await cleaner.sync(key_of(secret))
    return client, cleaner, result


async def test_cleaner_no_expiration() -> None:
    client, _cleaner, result = await clean(token_secret("tokenID", "tokenSecret"))
    assert client.actions == []
    assert result is None


async def test_cleaner_expired() -> None:
    secret = expiring(token_secret("tokenID", "tokenSecret"), -3600)
    client, _, _ = await clean(secret)
    assert client.actions == [delete(secret)]


async def test_cleaner_not_expired() -> None:
    client, _, result = await clean(expiring(token_secret("tokenID", "tokenSecret"), 3600))
    assert client.actions == []
    assert result is not None
    assert result.requeue_after == 3600.0


async def test_cleaner_expired_at() -> None:
    secret = expiring(token_secret("tokenID", "tokenSecret"), 2)
    client = FakeClient()
    client.add("secrets", secret)
    cleaner = TokenCleaner(context(client))
    put(cleaner.secret_informer.store, secret)
    cleaner._on_secret(Added(secret))
    await cleaner.process_next(cleaner.queue, cleaner.sync)
    assert client.actions == []  # not expired yet
    assert len(cleaner.queue) == 0  # waiting, not queued
    cleaner.ctx.clock.advance(2.0)  # type: ignore[attr-defined]
    assert len(cleaner.queue) == 1  # back at its expiry
    await cleaner.process_next(cleaner.queue, cleaner.sync)
    assert client.actions == [delete(secret)]
    cleaner.queue.shut_down()
