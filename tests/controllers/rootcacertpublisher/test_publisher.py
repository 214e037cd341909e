"""The root CA publisher's sync and wiring against a recording client: upstream's TestConfigMapCreation and
TestConfigMapUpdateNoHotLoop tables, TestSyncCounter's codes, and how the bundle is found."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.api.resources import CONFIGMAPS, Resource
from controller_manager.client.errors import (
    AlreadyExists,
    ApiConnectionError,
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
)
from controller_manager.clock import FakeClock
from controller_manager.controllers.rootcacertpublisher import (
    DESCRIPTION,
    DESCRIPTION_ANNOTATION,
    ROOT_CA_CERT_CONFIGMAP_NAME,
    InvalidRootCA,
    RootCACertPublisher,
    load_root_ca,
    read_ca,
)
from controller_manager.controllers.rootcacertpublisher.publisher import is_namespace_terminating_error, sync_code
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated
from tests.controllers.rootcacertpublisher.certs import self_signed_ca_pem
from tests.prometheus import sample_value

Obj = dict[str, Any]
NS = "default"
FAKE_ROOT_CA = "fake-root-ca"


def namespace(name: str, phase: str = "Active") -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "resourceVersion": "1"},
            "status": {"phase": phase}}


def ca_config_map(root_ca: str = FAKE_ROOT_CA, *, annotations: Mapping[str, str] | None = None,
                  extra: Mapping[str, str] | None = None) -> Obj:
    m: Obj = {"name": ROOT_CA_CERT_CONFIGMAP_NAME, "namespace": NS, "resourceVersion": "1"}
    if annotations is not None:
        m["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": m, "data": {"ca.crt": root_ca, **(extra or {})}}


def other_config_map(data: Mapping[str, str] | None = None) -> Obj:
    cm: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "other", "namespace": NS, "resourceVersion": "1"}}
    if data is not None:
        cm["data"] = dict(data)
    return cm


@dataclass
class Config:
    ca_file: str | None = None


@dataclass
class RecordingClient:
    """Records writes as (verb, namespace, object); ``fail`` is raised by the next write instead."""

    actions: list[tuple[str, str, Obj]] = field(default_factory=list)
    fail: BaseException | None = None
    config: Config = field(default_factory=Config)

    def _record(self, verb: str, res: Resource, namespace: str, obj: Obj) -> Obj:
        assert res is CONFIGMAPS
        self.actions.append((verb, namespace, copy.deepcopy(obj)))
        if self.fail is not None:
            raise self.fail
        return obj

    async def create(self, res: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        return self._record("create", res, str(namespace), obj)

    async def update(self, res: Resource, obj: Obj) -> Obj:
        return self._record("update", res, obj["metadata"]["namespace"], obj)


def new_publisher(client: RecordingClient, options: Mapping[str, Any] | None = None) -> RecordingPublisher:
    clock = FakeClock(1_700_000_000.0)
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock),  # type: ignore[arg-type]
                            options=dict(options or {}))
    return RecordingPublisher(ctx)


class RecordingPublisher(RootCACertPublisher):
    def cache(self, cm: Obj) -> None:
        self.cm_informer.store._put(key_of(cm), cm)

    def uncache(self, cm: Obj) -> None:
        self.cm_informer.store._remove(key_of(cm))

    async def drain(self) -> list[BaseException]:
        errors: list[BaseException] = []
        while len(self.queue):
            key = await self.queue.get()
            assert key is not None
            try:
                await self.sync(key)
            except Exception as err:
                errors.append(err)
            finally:
                self.queue.done(key)
        return errors


@pytest.fixture
def client() -> RecordingClient:
    return RecordingClient()


@pytest.fixture
def publisher(client: RecordingClient) -> Iterator[RecordingPublisher]:
    p = new_publisher(client)
    p.root_ca = FAKE_ROOT_CA
    yield p
    p.queue.shut_down()


# --- TestConfigMapCreation ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("existing", "added_ns", "updated_ns", "deleted_cm", "updated_cm", "expect"), [
    pytest.param([], namespace("new"), None, None, None, [("create", "new")], id="create new namespace"),
    pytest.param([other_config_map(), ca_config_map()], None, None, other_config_map(), None, [],
                 id="delete other configmap"),
    pytest.param([other_config_map(), ca_config_map()], None, None, ca_config_map(), None, [("create", NS)],
                 id="delete ca configmap"),
    pytest.param([ca_config_map()], None, None, None, ca_config_map(extra={"test": "test"}), [("update", NS)],
                 id="update ca configmap with adding field"),
    pytest.param([ca_config_map()], None, None, None, ca_config_map("abc"), [("update", NS)],
                 id="update ca configmap with modifying field"),
    pytest.param([ca_config_map(), other_config_map()], None, None, None, other_config_map({"aa": "bb"}), [],
                 id="update with other configmap"),
    pytest.param([], None, namespace(NS, "Terminating"), None, None, [],
                 id="update namespace with terminating state"),
])
async def test_config_map_creation(client: RecordingClient, publisher: RecordingPublisher, existing: list[Obj],
                                   added_ns: Obj | None, updated_ns: Obj | None, deleted_cm: Obj | None,
                                   updated_cm: Obj | None, expect: list[tuple[str, str]]) -> None:
    for cm in existing:
        publisher.cache(cm)
    if added_ns is not None:
        publisher._on_namespace(Added(added_ns))
    if updated_ns is not None:
        publisher._on_namespace(Updated(updated_ns, updated_ns))
    if deleted_cm is not None:
        publisher.uncache(deleted_cm)
        publisher._on_config_map(Deleted(deleted_cm))
    if updated_cm is not None:
        publisher.cache(updated_cm)
        publisher._on_config_map(Updated(updated_cm, updated_cm))
    assert await publisher.drain() == []
    assert [(verb, ns) for verb, ns, _ in client.actions] == expect
    for verb, ns, obj in client.actions:
        # Whatever the verb, what is written is the bundle and the description, nothing else of ours.
        assert obj["data"] == {"ca.crt": FAKE_ROOT_CA}
        assert obj["metadata"]["annotations"] == {DESCRIPTION_ANNOTATION: DESCRIPTION}
        assert obj["metadata"]["name"] == ROOT_CA_CERT_CONFIGMAP_NAME
        assert obj["metadata"]["namespace"] == ns
        if verb == "update":
            assert obj["metadata"]["resourceVersion"] == "1"  # written over what the cache saw, never blindly


async def test_created_config_map_is_exactly_upstreams(client: RecordingClient,
                                                       publisher: RecordingPublisher) -> None:
    assert await publisher.sync("new") is None
    assert client.actions == [("create", "new", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": "new",
                     "annotations": {"kubernetes.io/description": (
                         "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
                         "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
                         "guaranteed across distributions of Kubernetes clusters.")}},
        "data": {"ca.crt": "fake-root-ca"}})]


# --- TestConfigMapUpdateNoHotLoop ----------------------------------------------------------------------------

@pytest.mark.parametrize(("annotations", "expect_update"), [
    pytest.param(None, True, id="update-configmap-annotation"),
    pytest.param({DESCRIPTION_ANNOTATION: DESCRIPTION}, False,
                 id="no-update-configmap-if-annotation-present-and-equal"),
    pytest.param({DESCRIPTION_ANNOTATION: "different"}, False,
                 id="no-update-configmap-if-annotation-present-and-different"),
    pytest.param({DESCRIPTION_ANNOTATION: ""}, True, id="empty description is rewritten"),
])
async def test_config_map_update_no_hot_loop(client: RecordingClient, publisher: RecordingPublisher,
                                             annotations: dict[str, str] | None, expect_update: bool) -> None:
    publisher.root_ca = "fake"
    cached = ca_config_map("fake", annotations=annotations)
    snapshot = copy.deepcopy(cached)
    publisher.cache(cached)
    assert await publisher.sync(NS) is None
    if not expect_update:
        assert client.actions == []
        return
    assert [(verb, ns) for verb, ns, _ in client.actions] == [("update", NS)]
    written = client.actions[0][2]
    assert written["metadata"]["annotations"][DESCRIPTION_ANNOTATION] == DESCRIPTION
    assert written["data"]["ca.crt"] == "fake"
    assert cached == snapshot  # the cached object was not touched


async def test_update_keeps_everything_but_data_and_description(client: RecordingClient,
                                                                publisher: RecordingPublisher) -> None:
    cached = ca_config_map("stale", annotations={"team": "a", DESCRIPTION_ANNOTATION: "mine"})
    cached["metadata"]["labels"] = {"keep": "me"}
    cached["binaryData"] = {"blob": "AAAA"}
    publisher.cache(cached)
    assert await publisher.sync(NS) is None
    written = client.actions[0][2]
    assert written["metadata"]["labels"] == {"keep": "me"}
    assert written["metadata"]["annotations"] == {"team": "a", DESCRIPTION_ANNOTATION: DESCRIPTION}
    assert written["binaryData"] == {"blob": "AAAA"}  # upstream compares and replaces data only
    assert written["data"] == {"ca.crt": FAKE_ROOT_CA}


# --- failures -------------------------------------------------------------------------------------------------

def _terminating() -> Forbidden:
    return Forbidden(403, "Forbidden", 'configmaps "kube-root-ca.crt" is forbidden: unable to create new content in '
                     "namespace default because it is being terminated",
                     {"causes": [{"reason": "NamespaceTerminating", "message": "namespace default is being "
                                  "terminated", "field": "metadata.namespace"}]})


@pytest.mark.parametrize(("err", "retried"), [
    pytest.param(NotFound(404, "NotFound", 'namespaces "default" not found'), False, id="namespace gone"),
    pytest.param(_terminating(), False, id="namespace terminating"),
    pytest.param(AlreadyExists(409, "AlreadyExists", "exists"), True, id="already exists (cache behind) is retried"),
    pytest.param(Forbidden(403, "Forbidden", "denied"), True, id="other refusal is retried"),
])
async def test_create_failures(client: RecordingClient, publisher: RecordingPublisher, err: ApiError,
                               retried: bool) -> None:
    client.fail = err
    if retried:
        with pytest.raises(type(err)):
            await publisher.sync(NS)
    else:
        assert await publisher.sync(NS) is None


async def test_update_conflict_is_retried(client: RecordingClient, publisher: RecordingPublisher) -> None:
    publisher.cache(ca_config_map("stale"))
    client.fail = Conflict(409, "Conflict", "the object has been modified")
    with pytest.raises(Conflict):
        await publisher.sync(NS)


@pytest.mark.parametrize(("err", "expected"), [
    pytest.param(_terminating(), True, id="wire form (reason)"),
    # The cause's type travels under "reason"; a "type" key is not how the API server spells it.
    pytest.param(Forbidden(403, "Forbidden", "x", {"causes": [{"type": "NamespaceTerminating"}]}), False,
                 id="not the wire key"),
    pytest.param(Forbidden(403, "Forbidden", "x", {"causes": [{"reason": "Other"}]}), False, id="other cause"),
    pytest.param(RuntimeError("NamespaceTerminating"), False, id="not an API error"),
])
def test_is_namespace_terminating_error(err: BaseException, expected: bool) -> None:
    assert is_namespace_terminating_error(err) is expected


# --- wiring -------------------------------------------------------------------------------------------------

def test_identity_as_upstream(publisher: RecordingPublisher) -> None:
    assert (publisher.name, publisher.alias, publisher.queue.name, publisher.workers()) == (
        "root-ca-certificate-publisher-controller", "root-ca-cert-publisher", "root_ca_cert_publisher", 1)


def test_handlers(publisher: RecordingPublisher) -> None:
    cm = ca_config_map()
    publisher._on_config_map(Added(cm))  # upstream has no add handler for ConfigMaps
    publisher._on_namespace(Deleted(namespace("gone")))
    assert len(publisher.queue) == 0
    publisher._on_config_map(Deleted(cm, final_state_unknown=True))
    publisher._on_namespace(Added(namespace("dying", "Terminating")))  # added namespaces are always synced
    assert len(publisher.queue) == 2


# --- TestSyncCounter -----------------------------------------------------------------------------------------

def _count(code: str) -> float:
    return sample_value("root_ca_cert_publisher_sync_total", {"code": code}) or 0.0


@pytest.mark.parametrize(("err", "code"), [
    pytest.param(None, "200", id="nil error"),
    pytest.param(NotFound(404, "NotFound", 'configmap "test-configmap" not found'), "404", id="kube api error"),
    pytest.param(ApiConnectionError("connection refused"), "500", id="kube api error without code"),
    pytest.param(RuntimeError("test"), "500", id="general error"),
])
async def test_sync_counter(client: RecordingClient, publisher: RecordingPublisher, err: BaseException | None,
                            code: str) -> None:
    assert sync_code(err) == code
    # Through a real sync: a failing update (the create path turns a 404 into success).
    publisher.cache(ca_config_map("stale"))
    client.fail = err
    before = _count(code)
    if err is None:
        await publisher.sync(NS)
    else:
        with pytest.raises(type(err)):
            await publisher.sync(NS)
    assert _count(code) == before + 1
    assert sample_value("root_ca_cert_publisher_sync_duration_seconds_count", {"code": code})


# --- the bundle -----------------------------------------------------------------------------------------------

def test_read_ca_accepts_a_pem_bundle(tmp_path: Path) -> None:
    bundle = self_signed_ca_pem("one") + self_signed_ca_pem("two")
    path = tmp_path / "ca.crt"
    path.write_text(bundle)
    assert read_ca(str(path)) == bundle


@pytest.mark.parametrize("content", [
    pytest.param("not a certificate\n", id="not PEM"),
    pytest.param("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", id="bad certificate"),
    pytest.param("", id="empty"),
])
def test_read_ca_rejects_what_is_not_a_certificate(tmp_path: Path, content: str) -> None:
    path = tmp_path / "ca.crt"
    path.write_text(content)
    with pytest.raises(InvalidRootCA, match=re.escape(f"error parsing root-ca-file at {path}")):
        read_ca(str(path))


def test_read_ca_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidRootCA, match=r"error parsing root-ca-file at .*: No such file or directory"):
        read_ca(str(tmp_path / "missing.crt"))


def test_bundle_sources_in_order(tmp_path: Path) -> None:
    flag, client_ca = tmp_path / "flag.crt", tmp_path / "client.crt"
    flag.write_text(self_signed_ca_pem("flag"))
    client_ca.write_text("client bundle, not validated")
    assert load_root_ca({"root_ca_file": str(flag)}, Config(str(client_ca))) == flag.read_text()
    assert load_root_ca({}, Config(str(client_ca))) == "client bundle, not validated"
    assert load_root_ca({"root_ca_file": ""}, Config(None)) == ""  # plain HTTP: upstream's empty CAData
    assert load_root_ca({}, None) == ""


def test_bad_root_ca_file_fails_the_start(tmp_path: Path, client: RecordingClient) -> None:
    path = tmp_path / "ca.crt"
    path.write_text("garbage")
    with pytest.raises(InvalidRootCA):
        new_publisher(client, {"root_ca_file": str(path)})


def test_publisher_takes_the_client_ca_without_the_flag(tmp_path: Path, client: RecordingClient) -> None:
    pem = self_signed_ca_pem()
    (tmp_path / "ca.crt").write_text(pem)
    client.config = Config(str(tmp_path / "ca.crt"))
    p = new_publisher(client)
    try:
        assert p.root_ca == pem
    finally:
        p.queue.shut_down()
