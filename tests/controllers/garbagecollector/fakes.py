"""Test doubles for the collector's unit tables (upstream's fake metadata client, FakeRecorder with
IncludeObject, trackingWorkqueue), and a builder of a collector wired to them."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.controllers.garbagecollector.graph import Node, ObjectReference
from controller_manager.controllers.garbagecollector.graph_builder import GraphQueues
from controller_manager.controllers.garbagecollector.reference_cache import ReferenceCache
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.workqueue import RateLimitingQueue

T = TypeVar("T", bound=Hashable)

PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
ROLES_V1 = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True)
ROLES_V1BETA1 = Resource("rbac.authorization.k8s.io", "v1beta1", "roles", "Role", True)
SERVED = (PODS, NODES, SECRETS, REPLICATION_CONTROLLERS, DEPLOYMENTS, ROLES_V1, ROLES_V1BETA1)


def gvr_text(res: Resource) -> str:
    """schema.GroupVersionResource.String(): ``apps/v1, Resource=deployments``, ``/v1, Resource=pods``."""
    return f"{res.group}/{res.version}, Resource={res.plural}"


class FakeClient:
    """Objects by (group, version, plural, namespace, name); records each call as upstream's test prints it."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
        self.actions: list[str] = []
        self.failures: dict[tuple[str, str], ApiError] = {}  # (verb, name) -> error to raise
        self.discovery: dict[str, Any] = {}  # discovery documents by path ("/api", "/apis", "/api/v1", ...)

    @staticmethod
    def _key(res: Resource, namespace: str | None, name: str) -> tuple[str, str, str, str, str]:
        return (res.group, res.version, res.plural, namespace or "", name)

    def create(self, res: Resource, obj: Mapping[str, Any]) -> None:
        m = meta(obj)
        self.objects[self._key(res, m.get("namespace"), str(m["name"]))] = {
            **obj, "metadata": {**m, "resourceVersion": "1"}}

    def remove(self, res: Resource, namespace: str | None, name: str) -> None:
        del self.objects[self._key(res, namespace, name)]

    def _record(self, verb: str, res: Resource, namespace: str | None, name: str) -> None:
        text = f"{verb} {gvr_text(res)}"
        if namespace:
            text += f" ns={namespace}"
        if verb != "patch":
            text += f" name={name}"
        self.actions.append(text)
        failure = self.failures.get((verb, name))
        if failure is not None:
            raise failure

    def _lookup(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.objects.get(self._key(res, namespace, name))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.group_resource} "{name}" not found')
        return obj

    async def get(self, res: Resource, name: str, namespace: str | None = None, *,
                  metadata_only: bool = False) -> dict[str, Any]:
        self._record("get", res, namespace, name)
        obj = self._lookup(res, namespace, name)
        if metadata_only:  # what the metadata client gets: no spec or status to lean on
            return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
        return obj

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        self._record("delete", res, namespace, name)
        obj = self._lookup(res, namespace, name)
        if options.get("uid") and meta(obj).get("uid") != options["uid"]:
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition does not match")
        self.remove(res, namespace, name)
        return obj

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None,
                    **options: Any) -> dict[str, Any]:
        self._record("patch", res, namespace, name)
        return self._lookup(res, namespace, name)

    async def request(self, method: str, path: str, **_: Any) -> Any:
        doc = self.discovery.get(path)
        if isinstance(doc, ApiError):
            raise doc
        if doc is None:
            raise NotFound(404, "NotFound", f"the server could not find the requested resource ({path})")
        return doc

    def serve(self, resources: Sequence[Resource], *, failing: Sequence[str] = ()) -> None:
        """Discovery documents serving ``resources`` (all verbs); group/versions in ``failing`` answer 503."""
        by_gv: dict[str, list[Resource]] = {}
        for res in resources:
            by_gv.setdefault(res.api_version, []).append(res)
        groups: dict[str, list[str]] = {}
        for gv in [*by_gv, *failing]:
            if "/" in gv:
                group, version = gv.split("/")
                groups.setdefault(group, []).append(version)
        self.discovery = {
            "/api": {"versions": ["v1"]},
            "/apis": {"groups": [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs]}
                                 for g, vs in groups.items()]},
        }
        for gv, items in by_gv.items():
            path = f"/apis/{gv}" if "/" in gv else f"/api/{gv}"
            self.discovery[path] = {"groupVersion": gv, "resources": [
                {"name": r.plural, "kind": r.kind, "namespaced": r.namespaced, "verbs": list(r.verbs)}
                for r in items]}
        self.discovery.setdefault("/api/v1", {"groupVersion": "v1", "resources": []})
        for gv in failing:
            self.discovery[f"/apis/{gv}"] = ApiError(503, "ServiceUnavailable", "the server is currently unable")

    def take_actions(self) -> list[str]:
        actions, self.actions = self.actions, []
        return actions


class FakeRecorder:
    """record.FakeRecorder with IncludeObject: ``<type> <reason> <message> involvedObject{kind=..,apiVersion=..}``."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, **_: Any) -> None:
        self.events.append(f"{type} {reason} {message} involvedObject{{kind={obj.get('kind')},"
                           f"apiVersion={obj.get('apiVersion')}}}")

    def take(self) -> list[str]:
        events, self.events = self.events, []
        return events


class FakeEvents:
    def __init__(self, recorder: FakeRecorder) -> None:
        self._recorder = recorder

    def recorder(self, component: str) -> FakeRecorder:
        return self._recorder


class TrackingQueue(RateLimitingQueue[T]):
    """upstream's trackingWorkqueue: delayed and rate-limited adds are plain adds, and the pending items
    can be inspected in order."""

    def add_after(self, key: T, seconds: float) -> None:
        self.add(key)

    def add_rate_limited(self, key: T) -> None:
        self.add(key)

    def pending(self) -> list[T]:
        return list(self._queue)


def make_gc(client: FakeClient, *, served: Sequence[Resource] = SERVED, absent_cache_size: int = 100,
            options: Mapping[str, Any] | None = None, sync_period: float = 30.0
            ) -> tuple[GarbageCollector, FakeRecorder]:
    """A collector on fakes: tracking queues, a mapper knowing ``served``, nothing running."""
    recorder = FakeRecorder()
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=FakeEvents(recorder), options=dict(options or {}))  # type: ignore[arg-type]
    gc = GarbageCollector(ctx, sync_period=sync_period)
    gc.builder.queues = GraphQueues(TrackingQueue(clock=clock), TrackingQueue(clock=clock), TrackingQueue(clock=clock))
    gc.builder.recorder = recorder
    gc.builder.absent_owner_cache = ReferenceCache(absent_cache_size)
    gc.mapper.reset(served)
    return gc, recorder


def ref(api_version: str, kind: str, namespace: str, name: str, uid: str) -> ObjectReference:
    """makeID"""
    return ObjectReference(api_version, kind, name, uid, namespace)


def owner_ref(owner: ObjectReference, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid, **extra}


def metadata_obj(identity: ObjectReference, *owners: ObjectReference) -> dict[str, Any]:
    """makeMetadataObj / makeObj"""
    m: dict[str, Any] = {"name": identity.name, "uid": identity.uid}
    if identity.namespace:
        m["namespace"] = identity.namespace
    if owners:
        m["ownerReferences"] = [owner_ref(o) for o in owners]
    return {"apiVersion": identity.api_version, "kind": identity.kind, "metadata": m}


def verify_graph_invariants(uid_to_node: Mapping[str, Node]) -> list[str]:
    """Every dependent lists its owner and every observed owner lists its dependents (verifyGraphInvariants)."""
    problems: list[str] = []
    for uid, node in uid_to_node.items():
        for dep in node.get_dependents():
            if not any(str(o.get("uid")) == uid for o in dep.owners):
                problems.append(f"{node.identity} has dependent {dep.identity} which does not list it as an owner")
        for owner in node.owners:
            owner_node = uid_to_node.get(str(owner.get("uid")))
            if owner_node is not None and node not in owner_node.get_dependents():
                problems.append(f"{node.identity} has owner {owner_node.identity} which does not list it")
    return problems
