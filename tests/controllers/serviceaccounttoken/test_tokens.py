"""The service account token controller against a recording fake client: upstream's TestTokenCreation table
(tokens_controller_test.go), one case per row, plus the retry budget and the generator it is started with."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.client.errors import ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.serviceaccounttoken import TokensController
from controller_manager.controllers.serviceaccounttoken.tokens import MAX_RETRIES, SecretKey, secret_key_of
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.serviceaccounttoken.fake import Action, FakeClient

Obj = dict[str, Any]
NS = "default"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def refs(*names: str) -> list[Obj]:
    return [{"name": n} for n in names]


EMPTY: list[Obj] = []
MISSING = refs("missing-secret-1")
REGULAR = refs("regular-secret-1")
TOKEN = refs("token-secret-1")


def service_account(secret_refs: list[Obj], rv: str = "1") -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "uid": "12345", "namespace": NS, "resourceVersion": rv},
            "secrets": secret_refs}


def opaque_secret() -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "regular-secret-1", "namespace": NS, "uid": "23456", "resourceVersion": "1"},
            "data": {"mykey": b64("mydata")}}


def token_secret(*, drop: str = "", **data: str) -> Obj:
    values = {"token": "ABC", "ca.crt": "CA Data", "namespace": "default", **data}
    values.pop(drop, None)
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "token-secret-1", "namespace": NS, "uid": "23456", "resourceVersion": "1",
                         "annotations": {"kubernetes.io/service-account.name": "default",
                                         "kubernetes.io/service-account.uid": "12345"}},
            "data": {k: b64(v) for k, v in values.items()}}


class FixedGenerator:
    """upstream's testGenerator: always the token "ABC"."""

    def __init__(self, token: str = "ABC") -> None:
        self.token = token
        self.claims: list[dict[str, Any]] = []

    def generate(self, claims: Any) -> str:
        self.claims.append(dict(claims))
        return self.token


def new_controller(client: FakeClient, generator: Any = None) -> TokensController:
    clock = FakeClock(1_700_000_000.0)
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return TokensController(ctx, generator=generator or FixedGenerator(), root_ca_data=b"CA Data")


async def drain(c: TokensController) -> None:
    """Work both queues until empty, as upstream's test loop does."""
    while len(c.queue) or len(c.secret_queue):
        if len(c.queue):
            await c.process_next(c.queue, c.sync)
        if len(c.secret_queue):
            await c.process_next(c.secret_queue, c.sync_secret, max_retries=c.max_retries)


def sa_get() -> Action:
    return Action("get", "serviceaccounts", NS, "default")


def secret_get() -> Action:
    return Action("get", "secrets", NS, "token-secret-1")


def token_delete() -> Action:
    return Action("delete", "secrets", NS, "token-secret-1", {"uid": "23456"})


def secret_update() -> Action:
    return Action("update", "secrets", NS, "token-secret-1", token_secret())


@dataclass
class Case:
    client_objects: list[tuple[str, Obj]] = field(default_factory=list)
    existing_sa: Obj | None = None
    existing_secrets: list[Obj] = field(default_factory=list)
    added_sa: Obj | None = None
    updated_sa: Obj | None = None
    deleted_sa: Obj | None = None
    added_secret: Obj | None = None
    updated_secret: Obj | None = None
    deleted_secret: Obj | None = None
    expected: list[Action] = field(default_factory=list)


SA, SEC = "serviceaccounts", "secrets"
CASES: dict[str, Case] = {
    "new serviceaccount with no secrets": Case([(SA, service_account(EMPTY))], added_sa=service_account(EMPTY)),
    "new serviceaccount with missing secrets": Case([(SA, service_account(MISSING))],
                                                    added_sa=service_account(MISSING)),
    "new serviceaccount with non-token secrets": Case([(SA, service_account(REGULAR)), (SEC, opaque_secret())],
                                                      added_sa=service_account(REGULAR)),
    "new serviceaccount with token secrets": Case([(SA, service_account(TOKEN)), (SEC, token_secret())],
                                                  existing_secrets=[token_secret()], added_sa=service_account(TOKEN)),
    "updated serviceaccount with no secrets": Case([(SA, service_account(EMPTY))], updated_sa=service_account(EMPTY)),
    "updated serviceaccount with missing secrets": Case([(SA, service_account(MISSING))],
                                                        updated_sa=service_account(MISSING)),
    "updated serviceaccount with non-token secrets": Case([(SA, service_account(REGULAR)), (SEC, opaque_secret())],
                                                          updated_sa=service_account(REGULAR)),
    "updated serviceaccount with token secrets": Case(existing_secrets=[token_secret()],
                                                      updated_sa=service_account(TOKEN)),
    "updated serviceaccount with no secrets with resource conflict": Case(
        [(SA, service_account(EMPTY, rv="2"))], updated_sa=service_account(EMPTY)),
    "deleted serviceaccount with no secrets": Case(deleted_sa=service_account(EMPTY)),
    "deleted serviceaccount with missing secrets": Case(deleted_sa=service_account(MISSING)),
    "deleted serviceaccount with non-token secrets": Case([(SEC, opaque_secret())],
                                                          deleted_sa=service_account(REGULAR)),
    "deleted serviceaccount with token secrets": Case([(SEC, token_secret())], existing_secrets=[token_secret()],
                                                      deleted_sa=service_account(TOKEN), expected=[token_delete()]),
    "added secret without serviceaccount": Case([(SEC, token_secret())], added_secret=token_secret(),
                                                expected=[sa_get(), token_delete()]),
    "added secret with serviceaccount": Case(existing_sa=service_account(TOKEN), added_secret=token_secret()),
    "added token secret without token data": Case(
        [(SEC, token_secret(drop="token"))], existing_sa=service_account(TOKEN),
        added_secret=token_secret(drop="token"), expected=[secret_get(), secret_update()]),
    "added token secret without ca data": Case(
        [(SEC, token_secret(drop="ca.crt"))], existing_sa=service_account(TOKEN),
        added_secret=token_secret(drop="ca.crt"), expected=[secret_get(), secret_update()]),
    "added token secret with mismatched ca data": Case(
        [(SEC, token_secret(**{"ca.crt": "mismatched"}))], existing_sa=service_account(TOKEN),
        added_secret=token_secret(**{"ca.crt": "mismatched"}), expected=[secret_get(), secret_update()]),
    "added token secret without namespace data": Case(
        [(SEC, token_secret(drop="namespace"))], existing_sa=service_account(TOKEN),
        added_secret=token_secret(drop="namespace"), expected=[secret_get(), secret_update()]),
    "added token secret with custom namespace data": Case(
        [(SEC, token_secret(namespace="custom"))], existing_sa=service_account(TOKEN),
        added_secret=token_secret(namespace="custom")),  # the custom namespace is kept: no update
    "updated secret without serviceaccount": Case([(SEC, token_secret())], updated_secret=token_secret(),
                                                  expected=[sa_get(), token_delete()]),
    "updated secret with serviceaccount": Case(existing_sa=service_account(TOKEN), updated_secret=token_secret()),
    "updated token secret without token data": Case(
        [(SEC, token_secret(drop="token"))], existing_sa=service_account(TOKEN),
        updated_secret=token_secret(drop="token"), expected=[secret_get(), secret_update()]),
    "updated token secret without ca data": Case(
        [(SEC, token_secret(drop="ca.crt"))], existing_sa=service_account(TOKEN),
        updated_secret=token_secret(drop="ca.crt"), expected=[secret_get(), secret_update()]),
    "updated token secret with mismatched ca data": Case(
        [(SEC, token_secret(**{"ca.crt": "mismatched"}))], existing_sa=service_account(TOKEN),
        updated_secret=token_secret(**{"ca.crt": "mismatched"}), expected=[secret_get(), secret_update()]),
    "updated token secret without namespace data": Case(
        [(SEC, token_secret(drop="namespace"))], existing_sa=service_account(TOKEN),
        updated_secret=token_secret(drop="namespace"), expected=[secret_get(), secret_update()]),
    "updated token secret with custom namespace data": Case(
        [(SEC, token_secret(namespace="custom"))], existing_sa=service_account(TOKEN),
        updated_secret=token_secret(namespace="custom")),
    "deleted secret without serviceaccount": Case(deleted_secret=token_secret()),
    "deleted secret with serviceaccount with reference": Case(
        [(SA, service_account(TOKEN))], existing_sa=service_account(TOKEN), deleted_secret=token_secret(),
        expected=[sa_get(), Action("update", "serviceaccounts", NS, "default", service_account(EMPTY))]),
    "deleted secret with serviceaccount without reference": Case(
        existing_sa=service_account(EMPTY), deleted_secret=token_secret(), expected=[sa_get()]),
}


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


@pytest.fixture
def controller(client: FakeClient) -> Iterator[TokensController]:
    c = new_controller(client)
    yield c
    c.queue.shut_down()
    c.secret_queue.shut_down()


@pytest.mark.parametrize("name", sorted(CASES))
async def test_token_creation(name: str, client: FakeClient, controller: TokensController) -> None:
    tc = CASES[name]
    c = controller
    for plural, obj in tc.client_objects:
        client.add(plural, obj)
    sa_store, secret_store = c.sa_informer.store, c.secret_informer.store
    if tc.existing_sa is not None:
        sa_store._put(key_of(tc.existing_sa), tc.existing_sa)
    for s in tc.existing_secrets:
        secret_store._put(key_of(s), s)
    if tc.added_sa is not None or tc.updated_sa is not None:
        sa = tc.added_sa or tc.updated_sa
        assert sa is not None
        sa_store._put(key_of(sa), sa)
        c.queue.add(f"{NS}/default/{sa['metadata']['uid']}")
    if tc.deleted_sa is not None:
        sa_store._remove(key_of(tc.deleted_sa))
        c.queue.add(f"{NS}/default/{tc.deleted_sa['metadata']['uid']}")
    for secret in (tc.added_secret, tc.updated_secret):
        if secret is not None:
            secret_store._put(key_of(secret), secret)
            c.secret_queue.add(secret_key_of(secret))
    if tc.deleted_secret is not None:
        secret_store._remove(key_of(tc.deleted_secret))
        c.secret_queue.add(secret_key_of(tc.deleted_secret))

    await drain(c)

    assert len(c.queue) == 0
    assert len(c.secret_queue) == 0
    assert client.actions == tc.expected


def test_secret_keys_carry_the_service_account() -> None:
    assert secret_key_of(token_secret()) == SecretKey(NS, "token-secret-1", "23456", "default", "12345")


async def test_the_generated_token_is_for_the_service_account_and_the_secret(client: FakeClient) -> None:
    generator = FixedGenerator("signed")
    c = new_controller(client, generator)
    secret = token_secret(drop="token")
    client.add(SEC, secret)
    c.sa_informer.store._put(key_of(service_account(TOKEN)), service_account(TOKEN))
    c.secret_informer.store._put(key_of(secret), secret)
    c.secret_queue.add(secret_key_of(secret))
    await drain(c)
    assert generator.claims == [{
        "iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:default:default",
        "kubernetes.io/serviceaccount/namespace": "default",
        "kubernetes.io/serviceaccount/secret.name": "token-secret-1",
        "kubernetes.io/serviceaccount/service-account.name": "default",
        "kubernetes.io/serviceaccount/service-account.uid": "12345"}]
    stored = client.objects[(SEC, NS, "token-secret-1")]
    assert base64.b64decode(stored["data"]["token"]) == b"signed"
    c.queue.shut_down()
    c.secret_queue.shut_down()


async def test_a_failing_update_is_retried_up_to_max_retries_then_dropped(client: FakeClient) -> None:
    c = new_controller(client)
    secret = token_secret(drop="token")
    client.add(SEC, secret)
    client.fail[("update", "secrets")] = ServerError(500, "InternalError", "boom")
    c.sa_informer.store._put(key_of(service_account(TOKEN)), service_account(TOKEN))
    c.secret_informer.store._put(key_of(secret), secret)
    key = secret_key_of(secret)
    c.secret_queue.add(key)
    attempts = 0
    for _ in range(MAX_RETRIES):
        while not len(c.secret_queue):
            c.ctx.clock.advance(1000.0)  # type: ignore[attr-defined]
        await c.process_next(c.secret_queue, c.sync_secret, max_retries=c.max_retries)
        attempts += 1
    # the eleventh failure drops the key: nothing comes back, however long we wait
    while not len(c.secret_queue):
        c.ctx.clock.advance(1000.0)  # type: ignore[attr-defined]
    await c.process_next(c.secret_queue, c.sync_secret, max_retries=c.max_retries)
    c.ctx.clock.advance(10_000.0)  # type: ignore[attr-defined]
    assert len(c.secret_queue) == 0
    assert [a.verb for a in client.actions].count("update") == attempts + 1 == 11
    c.queue.shut_down()
    c.secret_queue.shut_down()
