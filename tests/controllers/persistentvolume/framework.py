"""Upstream's unit-test framework for the PV controller (``framework_test.go`` and ``pvtesting``), in Python.

A :class:`FakeApi` stands for the API server (volumes and claims by name, resourceVersion checks on every
write, a log of changed objects, injectable errors); :func:`run_sync_test` fills a :class:`Binder`'s caches
with a case's initial objects, calls the case's test function once, waits for background operations, and
compares what the fake API holds with the expected objects (resourceVersions aside) and the events with the
expected prefixes, as upstream's ``runSyncTests``. :func:`run_multisync_test` then replays "changed" events and
periodic syncs until nothing changes, as ``runMultisyncTests``.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller_manager.api.resources import PERSISTENTVOLUMES, Resource
from controller_manager.client.errors import AlreadyExists, Conflict, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.persistentvolume.binder import Binder
from controller_manager.controllers.persistentvolume.helpers import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_STORAGE_PROVISIONER,
    claim_key,
    pod_claim_names,
)
from controller_manager.controllers.persistentvolume.plugins import PluginError, ProvisionOptions, VolumePlugin

Obj = dict[str, Any]

NAMESPACE = "default"
MOCK_PLUGIN = "kubernetes.io/mock-volume"
ANN_SKIP_LOCAL_STORE = "pv-testing-skip-local-store"

CLASS_GOLD = "gold"
CLASS_SILVER = "silver"
CLASS_EMPTY = ""
CLASS_WAIT = "wait"
CLASS_EXTERNAL = "external"
CLASS_EXTERNAL_WAIT = "external-wait"
CLASS_UNKNOWN_INTERNAL = "unknown-internal"

NO_EVENTS: list[str] = []


def new_volume(name: str, capacity: str, claim_uid: str, claim_name: str, phase: str, policy: str, klass: str,
               *anns: str) -> Obj:
    """``newVolume``: a GCE PD volume (RWO, ROX), Filesystem mode."""
    volume: Obj = {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"capacity": {"storage": capacity}, "gcePersistentDisk": {"pdName": ""},
                 "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "persistentVolumeReclaimPolicy": policy,
                 "volumeMode": "Filesystem"},
        "status": {},
    }
    if klass:
        volume["spec"]["storageClassName"] = klass
    if phase:
        volume["status"]["phase"] = phase
    if claim_name:
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE, "name": claim_name}
        if claim_uid:
            ref["uid"] = claim_uid
        volume["spec"]["claimRef"] = ref
    if anns:
        volume["metadata"]["annotations"] = {a: MOCK_PLUGIN if a == ANN_DYNAMICALLY_PROVISIONED else "yes"
                                             for a in anns}
    return volume


def new_claim(name: str, uid: str, capacity: str, volume_name: str, phase: str, klass: str | None,
              *anns: str) -> Obj:
    """``newClaim``: RWO+ROX, Filesystem; a Bound claim has the status a binding leaves."""
    claim: Obj = {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1"},
        "spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "resources": {"requests": {"storage": capacity}},
                 "volumeMode": "Filesystem"},
        "status": {"phase": phase} if phase else {},
    }
    if volume_name:
        claim["spec"]["volumeName"] = volume_name
    if klass is not None:
        claim["spec"]["storageClassName"] = klass
    if anns:
        claim["metadata"]["annotations"] = {
            a: MOCK_PLUGIN if a in (ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER) else "yes" for a in anns}
    if phase == "Bound":
        claim["status"]["accessModes"] = list(claim["spec"]["accessModes"])
        claim["status"]["capacity"] = dict(claim["spec"]["resources"]["requests"])
    return claim


def with_labels(labels: Mapping[str, str], volumes: list[Obj]) -> list[Obj]:
    volumes[0]["metadata"]["labels"] = dict(labels)
    return volumes


def with_label_selector(labels: Mapping[str, str], claims: list[Obj]) -> list[Obj]:
    claims[0]["spec"]["selector"] = {"matchLabels": dict(labels)}
    return claims


def with_expected_capacity(capacity: str, claims: list[Obj]) -> list[Obj]:
    claims[0]["status"]["capacity"] = {"storage": capacity}
    return claims


def with_message(message: str, volumes: list[Obj]) -> list[Obj]:
    volumes[0]["status"]["message"] = message
    return volumes


def with_volume_mode(mode: str | None, objs: list[Obj]) -> list[Obj]:
    if mode is None:
        objs[0]["spec"].pop("volumeMode", None)
    else:
        objs[0]["spec"]["volumeMode"] = mode
    return objs


def with_access_modes(modes: list[str], claims: list[Obj]) -> list[Obj]:
    claims[0]["spec"]["accessModes"] = modes
    return claims


def with_claim_annotation(name: str, value: str, claims: list[Obj]) -> list[Obj]:
    claims[0]["metadata"].setdefault("annotations", {})[name] = value
    return claims


def with_volume_annotation(name: str, value: str, volumes: list[Obj]) -> list[Obj]:
    for volume in volumes:
        volume["metadata"].setdefault("annotations", {})[name] = value
    return volumes


def volumes_with_vac(vac: str, volumes: list[Obj]) -> list[Obj]:
    for volume in volumes:
        volume["spec"]["volumeAttributesClassName"] = vac
    return volumes


def claim_with_vac(vac: str, claims: list[Obj]) -> list[Obj]:
    claims[0]["spec"]["volumeAttributesClassName"] = vac
    return claims


def with_expected_vac(vac: str, claims: list[Obj]) -> list[Obj]:
    claims[0]["status"]["currentVolumeAttributesClassName"] = vac
    return claims


def with_finalizers(finalizers: list[str], objs: list[Obj]) -> list[Obj]:
    for obj in objs:
        obj["metadata"]["finalizers"] = list(finalizers)
    return objs


def with_deletion_timestamp(objs: list[Obj]) -> list[Obj]:
    for obj in objs:
        obj["metadata"]["deletionTimestamp"] = "2020-02-18T10:30:30Z"
    return objs


def storage_class(name: str, provisioner: str = MOCK_PLUGIN, mode: str | None = "Immediate",
                  **extra: Any) -> Obj:
    sc: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
               "provisioner": provisioner, "reclaimPolicy": "Delete", **extra}
    if mode is not None:
        sc["volumeBindingMode"] = mode
    return sc


@dataclass
class ReactorError:
    """``pvtesting.ReactorError``: the first matching write fails with ``error`` (then the rule is spent)."""

    verb: str  # "create", "update", "delete", "get"
    resource: str  # "persistentvolumes" / "persistentvolumeclaims"
    error: Exception


@dataclass
class FakeApi:
    """``pvtesting.VolumeReactor``: what the controller reads and writes, with resourceVersion checks."""

    errors: list[ReactorError] = field(default_factory=list)
    volumes: dict[str, Obj] = field(default_factory=dict)
    claims: dict[str, Obj] = field(default_factory=dict)
    changed: list[Obj] = field(default_factory=list)
    changes_since_sync: int = 0
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def _store(self, res: Resource) -> dict[str, Obj]:
        return self.volumes if res is PERSISTENTVOLUMES else self.claims

    @staticmethod
    def _key(res: Resource, obj: Mapping[str, Any]) -> str:
        return obj["metadata"]["name"] if res is PERSISTENTVOLUMES else claim_key(obj)

    def _inject(self, verb: str, res: Resource) -> None:
        for rule in self.errors:
            if rule.verb == verb and rule.resource == res.plural:
                self.errors.remove(rule)
                raise rule.error

    def _changed(self, res: Resource, obj: Obj) -> None:
        self.changed.append({"kind": res.kind, **copy.deepcopy(obj)})
        self.changes_since_sync += 1

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("get", res.plural, name))
        self._inject("get", res)
        key = name if res is PERSISTENTVOLUMES else f"{namespace}/{name}"
        obj = self._store(res).get(key)
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return copy.deepcopy(obj)

    async def _write(self, verb: str, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append((verb, res.plural, obj["metadata"]["name"]))
        self._inject("update", res)
        store = self._store(res)
        key = self._key(res, obj)
        stored = store.get(key)
        if stored is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{obj["metadata"]["name"]}" not found')
        if stored["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
            raise Conflict(409, "Conflict", "Version conflict")
        new = copy.deepcopy(dict(obj))
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        store[key] = new
        self._changed(res, new)
        return copy.deepcopy(new)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self._write("update", res, obj)

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self._write("update_status", res, obj)

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("create", res.plural, obj["metadata"]["name"]))
        self._inject("create", res)
        key = self._key(res, obj)
        store = self._store(res)
        if key in store:
            raise AlreadyExists(409, "AlreadyExists", f'{res.plural} "{obj["metadata"]["name"]}" already exists')
        new = copy.deepcopy(dict(obj))
        new.pop("apiVersion", None)
        new.pop("kind", None)
        new["metadata"]["resourceVersion"] = "1"
        store[key] = new
        self._changed(res, new)
        return copy.deepcopy(new)

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("delete", res.plural, name))
        self._inject("delete", res)
        key = name if res is PERSISTENTVOLUMES else f"{namespace}/{name}"
        if self._store(res).pop(key, None) is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        self.changes_since_sync += 1
        return {}

    def add(self, volumes: Sequence[Obj], claims: Sequence[Obj]) -> None:
        for claim in claims:
            self.claims[claim_key(claim)] = copy.deepcopy(claim)
        for volume in volumes:
            self.volumes[volume["metadata"]["name"]] = copy.deepcopy(volume)

    def sync_all(self) -> None:
        for claim in self.claims.values():
            self.changed.append({"kind": "PersistentVolumeClaim", **copy.deepcopy(claim)})
        for volume in self.volumes.values():
            self.changed.append({"kind": "PersistentVolume", **copy.deepcopy(volume)})
        self.changes_since_sync = 0


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              resource: Resource | None = None) -> None:
        self.events.append(f"{type} {reason} {message}")


def _normal(obj: Mapping[str, Any]) -> Obj:
    out = copy.deepcopy(dict(obj))
    out.pop("kind", None)
    out["metadata"].pop("resourceVersion", None)
    ref = out.get("spec", {}).get("claimRef")
    if isinstance(ref, dict):
        ref.pop("resourceVersion", None)
    status = out.get("status")
    if isinstance(status, dict):
        status.pop("lastPhaseTransitionTime", None)
    return out


def check_objects(kind: str, expected: Sequence[Obj], got: Mapping[str, Obj]) -> None:
    want = {o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]: _normal(o) for o in expected}
    have = {o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]: _normal(o) for o in got.values()}
    assert have == want, f"{kind} differ: got {have!r}, want {want!r}"


def check_events(expected: Sequence[str], got: Sequence[str]) -> None:
    """Upstream's ``checkEvents`` reads as many events as expected and compares them as prefixes."""
    assert len(got) >= len(expected), f"events {expected!r} not all emitted: {got!r}"
    for want, have in zip(expected, got, strict=False):
        assert have.startswith(want), f"expected event {want!r}, got {have!r}"


@dataclass
class ProvisionCall:
    """``provisionCall``: the parameters the provisioner must be given, and its result (None: a volume)."""

    expected_parameters: dict[str, str]
    ret: Exception | None = None


class _MockProvisioner:
    def __init__(self, plugin: MockPlugin, options: ProvisionOptions) -> None:
        self.plugin = plugin
        self.options = options

    async def provision(self, selected_node: Any, allowed_topologies: Any) -> dict[str, Any]:
        plugin = self.plugin
        if len(plugin.provision_calls) <= plugin.provisioned:
            raise PluginError(f"Mock plugin error: unexpected provisioner call {plugin.provisioned}")
        call = plugin.provision_calls[plugin.provisioned]
        if call.expected_parameters != self.options.parameters:
            raise PluginError("Mock plugin error: invalid provisioner call")
        plugin.provisioned += 1
        if call.ret is not None:
            raise PluginError(str(call.ret))
        claim_spec = self.options.claim["spec"]
        volume: dict[str, Any] = {
            "metadata": {"name": self.options.pv_name},
            "spec": {"capacity": {"storage": claim_spec["resources"]["requests"]["storage"]},
                     "accessModes": list(claim_spec["accessModes"]),
                     "persistentVolumeReclaimPolicy": self.options.reclaim_policy,
                     "gcePersistentDisk": {"pdName": ""}},
            "status": {"phase": "Available"},
        }
        if claim_spec.get("volumeMode") is not None:
            volume["spec"]["volumeMode"] = claim_spec["volumeMode"]
        return volume


class MockPlugin:
    """``mockVolumePlugin``: a deleter and a provisioner; each call returns the next configured result."""

    name = MOCK_PLUGIN

    def __init__(self, delete_calls: Sequence[Exception | None] = (),
                 provision_calls: Sequence[ProvisionCall] = ()) -> None:
        self.delete_calls = list(delete_calls)
        self.provision_calls = list(provision_calls)
        self.deleted = 0
        self.provisioned = 0

    def provisionable(self) -> bool:
        return True

    def supports_mount_options(self) -> bool:
        return False

    def new_provisioner(self, options: ProvisionOptions) -> _MockProvisioner:
        if not self.provision_calls:
            raise PluginError("Mock plugin error: no provisionCalls configured")
        return _MockProvisioner(self, options)

    def can_support(self, volume: Mapping[str, Any]) -> bool:
        return True

    def deletable(self) -> bool:
        return True

    async def delete(self, volume: Mapping[str, Any]) -> None:
        if not self.delete_calls:
            raise PluginError("failed to create deleter for volume "
                              f'"{volume["metadata"]["name"]}": Mock plugin error: no deleteCalls configured')
        result = self.delete_calls.pop(0)
        self.deleted += 1
        if result is not None:
            raise PluginError(str(result))


TestCall = Callable[[Binder, FakeApi, "Case"], Awaitable[None]]


@dataclass
class Case:
    name: str
    initial_volumes: list[Obj]
    expected_volumes: list[Obj]
    initial_claims: list[Obj]
    expected_claims: list[Obj]
    expected_events: list[str]
    test: TestCall
    errors: list[ReactorError] = field(default_factory=list)
    plugins: list[VolumePlugin] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.name


async def sync_claim(binder: Binder, api: FakeApi, case: Case) -> None:
    await binder.sync_claim(case.initial_claims[0])


async def sync_claim_error(binder: Binder, api: FakeApi, case: Case) -> None:
    try:
        await binder.sync_claim(case.initial_claims[0])
    except Exception:
        return
    raise AssertionError("syncClaim succeeded when failure was expected")


async def sync_volume(binder: Binder, api: FakeApi, case: Case) -> None:
    await binder.sync_volume(case.initial_volumes[0])


def new_binder(api: FakeApi, classes: Sequence[Obj], pods: Sequence[Obj] = (),
               plugins: Sequence[VolumePlugin] = (), nodes: Sequence[str] = ()) -> tuple[Binder, FakeRecorder]:
    recorder = FakeRecorder()
    by_name = {c["metadata"]["name"]: c for c in classes}
    binder = Binder(api, recorder, FakeClock(), structlog.get_logger("test"),
                    get_class=by_name.get, list_classes=lambda: list(by_name.values()),
                    pods_for_claim=lambda key: [p for p in pods if key in pod_claim_names(p)],
                    get_node=lambda name: {"metadata": {"name": name}} if name in nodes else None,
                    plugins=plugins)
    binder.create_provisioned_pv_interval = 0.0  # upstream's tests shorten it too
    return binder, recorder


async def run_sync_test(case: Case, classes: Sequence[Obj] = (), pods: Sequence[Obj] = ()) -> None:
    api = FakeApi(errors=list(case.errors))
    binder, recorder = new_binder(api, classes, pods, case.plugins, case.nodes)
    for claim in case.initial_claims:
        if ANN_SKIP_LOCAL_STORE not in (claim["metadata"].get("annotations") or {}):
            binder.claims[claim_key(claim)] = copy.deepcopy(claim)
    for volume in case.initial_volumes:
        if ANN_SKIP_LOCAL_STORE not in (volume["metadata"].get("annotations") or {}):
            binder.volumes[volume["metadata"]["name"]] = copy.deepcopy(volume)
    api.add(case.initial_volumes, case.initial_claims)
    await case.test(binder, api, case)
    await binder.operations.wait_idle()
    check_objects("claims", case.expected_claims, api.claims)
    check_objects("volumes", case.expected_volumes, api.volumes)
    check_events(case.expected_events, recorder.events)


async def run_multisync_test(case: Case, classes: Sequence[Obj] = ()) -> None:
    api = FakeApi(errors=list(case.errors))
    binder, recorder = new_binder(api, classes, (), case.plugins, case.nodes)
    binder.enqueue_claim = lambda key: None
    for claim in case.initial_claims:
        binder.claims[claim_key(claim)] = copy.deepcopy(claim)
    for volume in case.initial_volumes:
        binder.volumes[volume["metadata"]["name"]] = copy.deepcopy(volume)
    api.add(case.initial_volumes, case.initial_claims)
    await case.test(binder, api, case)
    first_sync = True
    for _ in range(100):
        await binder.operations.wait_idle()
        # Operations that failed wait for their backoff: upstream sleeps 600 ms per round, here time is fake.
        binder.operations.failures.clear()
        if not api.changed:
            if first_sync or api.changes_since_sync > 0:
                first_sync = False
                api.sync_all()
                continue
            break
        obj = api.changed.pop(0)
        kind = obj.pop("kind")
        try:
            if kind == "PersistentVolumeClaim":
                binder.claims[claim_key(obj)] = obj
                await binder.sync_claim(obj)
            else:
                binder.volumes[obj["metadata"]["name"]] = obj
                await binder.sync_volume(obj)
        except Conflict:
            pass  # upstream ignores version conflicts here
    else:
        raise AssertionError(f"{case.name}: too many iterations")
    check_objects("claims", case.expected_claims, api.claims)
    check_objects("volumes", case.expected_volumes, api.volumes)
    check_events(case.expected_events, recorder.events)


__all__ = [name for name in dir() if not name.startswith("_")]
