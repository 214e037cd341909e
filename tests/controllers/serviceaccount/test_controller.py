"""The service account controller's sync and wiring against a recording client: upstream's
TestServiceAccountCreation table, and how create failures are handled."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.api.resources import SERVICEACCOUNTS, Resource
from controller_manager.client.errors import AlreadyExists, ApiError, Forbidden, ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.serviceaccount import DEFAULT_SERVICE_ACCOUNTS, ServiceAccountsController
from controller_manager.controllers.serviceaccount.controller import CreateErrors, is_namespace_terminating_error
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

Obj = dict[str, Any]
NS = "default"
DEFAULT, MANAGED = "default", "managed"


def namespace(phase: str, name: str = NS) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "resourceVersion": "1"},
            "status": {"phase": phase}}


def service_account(name: str, ns: str = NS) -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1"}}


ACTIVE = namespace("Active")
TERMINATING = namespace("Terminating")


@dataclass
class RecordingClient:
    """Records creates; ``fail[name]`` is raised instead for that object's create."""

    creates: list[tuple[str, str, Obj]] = field(default_factory=list)
    fail: dict[str, BaseException] = field(default_factory=dict)

    async def create(self, res: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        assert res is SERVICEACCOUNTS
        name = obj["metadata"]["name"]
        self.creates.append((res.plural, str(namespace), obj))
        if name in self.fail:
            raise self.fail[name]
        return obj


def new_controller(client: RecordingClient,
                   service_accounts: Sequence[Mapping[str, Any]] = DEFAULT_SERVICE_ACCOUNTS,
                   ) -> ServiceAccountsController:
    clock = FakeClock(1_700_000_000.0)
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return ServiceAccountsController(ctx, service_accounts)


async def drain(c: ServiceAccountsController) -> list[BaseException]:
    """Sync every queued key once, as a worker would; the errors the syncs raised."""
    errors: list[BaseException] = []
    while len(c.queue):
        key = await c.queue.get()
        assert key is not None
        try:
            await c.sync(key)
        except Exception as err:
            errors.append(err)
        finally:
            c.queue.done(key)
    return errors


@pytest.fixture
def client() -> RecordingClient:
    return RecordingClient()


@pytest.fixture
def managed(client: RecordingClient) -> Iterator[ServiceAccountsController]:
    c = new_controller(client, ({"metadata": {"name": DEFAULT}}, {"metadata": {"name": MANAGED}}))
    yield c
    c.queue.shut_down()


@pytest.mark.parametrize(("existing_ns", "existing_sas", "added_ns", "updated_ns", "deleted_sa", "expect_created"), [
    pytest.param(None, [], ACTIVE, None, None, [DEFAULT, MANAGED], id="new active namespace missing serviceaccounts"),
    pytest.param(None, [MANAGED], ACTIVE, None, None, [DEFAULT], id="new active namespace missing serviceaccount"),
    pytest.param(None, [DEFAULT, MANAGED], ACTIVE, None, None, [], id="new active namespace with serviceaccounts"),
    pytest.param(None, [], TERMINATING, None, None, [], id="new terminating namespace"),
    pytest.param(None, [], None, ACTIVE, None, [DEFAULT, MANAGED],
                 id="updated active namespace missing serviceaccounts"),
    pytest.param(None, [DEFAULT], None, ACTIVE, None, [MANAGED], id="updated active namespace missing serviceaccount"),
    pytest.param(None, [DEFAULT, MANAGED], None, ACTIVE, None, [], id="updated active namespace with serviceaccounts"),
    pytest.param(None, [], None, TERMINATING, None, [], id="updated terminating namespace"),
    pytest.param(None, [], None, None, DEFAULT, [], id="deleted serviceaccount without namespace"),
    pytest.param(ACTIVE, [MANAGED], None, None, DEFAULT, [DEFAULT], id="deleted serviceaccount with active namespace"),
    pytest.param(TERMINATING, [], None, None, DEFAULT, [], id="deleted serviceaccount with terminating namespace"),
    pytest.param(ACTIVE, [DEFAULT, MANAGED], None, None, "other-unmanaged", [],
                 id="deleted unmanaged serviceaccount with active namespace"),
    pytest.param(TERMINATING, [], None, None, "other-unmanaged", [],
                 id="deleted unmanaged serviceaccount with terminating namespace"),
])
async def test_service_account_creation(client: RecordingClient, managed: ServiceAccountsController,
                                        existing_ns: Obj | None, existing_sas: list[str], added_ns: Obj | None,
                                        updated_ns: Obj | None, deleted_sa: str | None,
                                        expect_created: list[str]) -> None:
    c = managed
    if existing_ns is not None:
        c.ns_informer.store._put(key_of(existing_ns), existing_ns)
    for name in existing_sas:
        sa = service_account(name)
        c.sa_informer.store._put(key_of(sa), sa)
    if added_ns is not None:
        c.ns_informer.store._put(key_of(added_ns), added_ns)
        c._on_namespace(Added(added_ns))
    if updated_ns is not None:
        c.ns_informer.store._put(key_of(updated_ns), updated_ns)
        c._on_namespace(Updated(updated_ns, updated_ns))
    if deleted_sa is not None:
        c._on_service_account(Deleted(service_account(deleted_sa)))

    assert len(c.queue) == 1  # every case queues its namespace exactly once
    assert await drain(c) == []
    assert [(plural, ns, obj["metadata"]["name"]) for plural, ns, obj in client.creates] == [
        ("serviceaccounts", NS, name) for name in expect_created]
    for _, _, obj in client.creates:
        assert obj == {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": obj["metadata"]["name"], "namespace": NS}}


async def test_default_options_ensure_only_default(client: RecordingClient) -> None:
    c = new_controller(client)
    c.ns_informer.store._put(NS, ACTIVE)
    c._on_namespace(Added(ACTIVE))
    assert await drain(c) == []
    assert [obj["metadata"] for _, _, obj in client.creates] == [{"name": "default", "namespace": NS}]


async def test_identity_as_upstream(client: RecordingClient) -> None:
    c = new_controller(client)
    assert (c.name, c.alias, c.queue.name, c.workers()) == (
        "serviceaccount-controller", "serviceaccount", "serviceaccount", 1)
    # No flag changes the worker count: upstream hard-codes one.
    c.ctx.options = {"concurrent_serviceaccount_syncs": 7}
    assert c.workers() == 1


def terminating_refusal() -> Forbidden:
    # What NamespaceLifecycle admission answers; the cause's type travels as "reason" (metav1.StatusCause).
    return Forbidden(403, "Forbidden", 'serviceaccounts "default" is forbidden: unable to create new content in '
                     "namespace default because it is being terminated",
                     {"causes": [{"reason": "NamespaceTerminating", "message": "namespace default is being "
                                  "terminated", "field": "metadata.namespace"}]})


@pytest.mark.parametrize(("errors", "raised"), [
    pytest.param({DEFAULT: AlreadyExists(409, "AlreadyExists", 'serviceaccounts "default" already exists')}, None,
                 id="already exists is success"),
    pytest.param({DEFAULT: terminating_refusal()}, None, id="namespace terminating is success"),
    pytest.param({DEFAULT: Forbidden(403, "Forbidden", "denied")}, "denied", id="other refusal is retried"),
    pytest.param({DEFAULT: ServerError(500, "InternalError", "boom"), MANAGED: ServerError(503, "", "later")},
                 "[boom, later]", id="all failures aggregated"),
])
async def test_create_failures(client: RecordingClient, managed: ServiceAccountsController,
                               errors: dict[str, ApiError], raised: str | None) -> None:
    client.fail = dict(errors)
    managed.ns_informer.store._put(NS, ACTIVE)
    if raised is None:
        assert await managed.sync(NS) is None
    else:
        with pytest.raises(ApiError if "[" not in raised else CreateErrors) as info:
            await managed.sync(NS)
        assert str(info.value) == raised
    # Whatever failed, every missing account was attempted.
    assert [obj["metadata"]["name"] for _, _, obj in client.creates] == [DEFAULT, MANAGED]


@pytest.mark.parametrize(("err", "expected"), [
    pytest.param(terminating_refusal(), True, id="wire form (reason)"),
    # The cause's type travels under "reason"; a "type" key is not how the API server spells it.
    pytest.param(Forbidden(403, "Forbidden", "x", {"causes": [{"type": "NamespaceTerminating"}]}), False,
                 id="not the wire key"),
    pytest.param(Forbidden(403, "Forbidden", "x", {"causes": [{"reason": "FieldValueInvalid"}]}), False,
                 id="other cause"),
    pytest.param(Forbidden(403, "Forbidden", "x"), False, id="no details"),
    pytest.param(ValueError("NamespaceTerminating"), False, id="not an API error"),
])
def test_is_namespace_terminating_error(err: BaseException, expected: bool) -> None:
    assert is_namespace_terminating_error(err) is expected


def test_handlers_ignore_what_cannot_lose_an_account(managed: ServiceAccountsController) -> None:
    sa = service_account(DEFAULT)
    managed._on_service_account(Added(sa))
    managed._on_service_account(Updated(sa, sa))
    managed._on_namespace(Deleted(ACTIVE))
    assert len(managed.queue) == 0
    managed._on_service_account(Deleted(sa, final_state_unknown=True))
    assert len(managed.queue) == 1
