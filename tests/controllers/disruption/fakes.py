"""Fakes and builders for the disruption controller's unit tests (upstream's ``newFakeDisruptionController``).

The controller gets a real SharedInformerFactory that is never run: tests put objects in its caches by hand, as
upstream's tests add to the informers' stores. :class:`FakeClient` records status writes per PDB (upstream's
``pdbStates``), answers ``/scale`` and discovery from tables the test fills (the fake scale and discovery
clients), and can fail a write once (a reactor).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import key_of
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.disruption import DisruptionController
from controller_manager.controllers.disruption.status import DISRUPTION_ALLOWED_CONDITION, find_condition
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformer, SharedInformerFactory

NS = "default"
_uids = itertools.count(1)

CUSTOM_GROUP, CUSTOM_VERSION, CUSTOM_KIND = "custom.k8s.io", "v1", "customresource"
CUSTOM_RESOURCE = Resource(CUSTOM_GROUP, CUSTOM_VERSION, "customresources", CUSTOM_KIND, True, (), ("scale",))


class FakeRecorder:
    """Upstream's ``record.FakeRecorder``: every event, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []  # (object key, type, reason, message)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *, resource: Any = None) -> None:
        self.events.append((key_of(obj), type_, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.events]


@dataclass
class FakeClient:
    """Status writes by PDB key; scales and discovery from tables; one-shot failures by verb."""

    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)  # last PDB written, by key
    writes: int = 0
    scales: dict[tuple[str, str], dict[str, Any] | ApiError] = field(default_factory=dict)  # (plural, name)
    discovery: list[Resource] = field(default_factory=list)
    group_versions: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> APIResourceList
    patches: list[tuple[str, str, Any, str | None]] = field(default_factory=list)  # (ns, name, patch, subresource)
    before_status_write: Callable[[dict[str, Any]], ApiError | None] | None = None
    discover_calls: int = 0

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        if self.before_status_write is not None:
            hook, self.before_status_write = self.before_status_write, None
            err = hook(dict(obj))
            if err is not None:
                raise err
        self.writes += 1
        self.statuses[key_of(obj)] = dict(obj)
        return dict(obj)

    async def get_scale(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any]:
        found = self.scales.get((res.plural, name))
        if isinstance(found, ApiError):
            raise found
        if found is None:
            raise NotFound(404, "NotFound", f'{res.group_resource} "{name}" not found')
        return found

    async def discover(self) -> list[Resource]:
        self.discover_calls += 1
        return list(self.discovery)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        doc = self.group_versions.get(path)
        if doc is None:
            raise NotFound(404, "NotFound", "the server could not find the requested resource")
        return doc

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        self.patches.append((namespace or "", name, patch, subresource))
        return {}


def new_controller(now: float = 1_700_000_000.0, **kwargs: Any
                   ) -> tuple[DisruptionController, FakeClient, FakeClock, FakeRecorder]:
    client = FakeClient()
    clock = FakeClock(now)
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    kwargs.setdefault("watch_replication_controllers", True)
    dc = DisruptionController(ctx, **kwargs)
    recorder = FakeRecorder()
    dc.recorder = recorder  # type: ignore[assignment]
    return dc, client, clock, recorder


def add(informer: SharedInformer | None, *objs: Mapping[str, Any]) -> None:
    """Put objects in an informer's cache without telling the handlers (upstream's ``store.Add``)."""
    assert informer is not None
    for obj in objs:
        informer.store._put(key_of(obj), dict(obj))


# --- builders (upstream's newPod, newReplicaSet, ...) ---------------------------------------------------------


def foo_bar() -> dict[str, str]:
    return {"foo": "bar"}


def _meta(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{next(_uids)}", "resourceVersion": "18"}
    if labels is not None:
        m["labels"] = dict(labels)
    return m


def new_pdb(*, min_available: int | str | None = None, max_unavailable: int | str | None = None,
            selector: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    spec: dict[str, Any] = {"selector": dict(selector) if selector is not None else {"matchLabels": foo_bar()}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta("foobar"), "spec": spec}
    return pdb, key_of(pdb)


def new_pod(name: str, *, ready: bool = True, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}] if ready else []
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**_meta(name, labels or foo_bar()), "annotations": {}},
            "spec": {}, "status": {"conditions": conditions}}


def _workload(api_version: str, kind: str, size: int, selector: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": _meta("foobar", foo_bar()),
            "spec": {"replicas": size, "selector": selector}}


def new_replication_controller(size: int) -> dict[str, Any]:
    return _workload("v1", "ReplicationController", size, foo_bar())


def new_replica_set(size: int) -> dict[str, Any]:
    return _workload("apps/v1", "ReplicaSet", size, {"matchLabels": foo_bar()})


def new_deployment(size: int) -> dict[str, Any]:
    return _workload("apps/v1", "Deployment", size, {"matchLabels": foo_bar()})


def new_stateful_set(size: int) -> dict[str, Any]:
    return _workload("apps/v1", "StatefulSet", size, {"matchLabels": foo_bar()})


def with_name(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "name": name}}


def owned_by(pod: dict[str, Any], owner: Mapping[str, Any], *, api_version: str | None = None) -> dict[str, Any]:
    """The pod with one more controller reference, to ``owner`` (``updatePodOwnerToRc`` and friends)."""
    ref = {"apiVersion": api_version or owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True}
    m = pod["metadata"]
    return {**pod, "metadata": {**m, "ownerReferences": [*(m.get("ownerReferences") or []), ref]}}


def set_ready(pod: dict[str, Any], ready: bool) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}] if ready else []
    return {**pod, "status": {**pod["status"], "conditions": conditions}}


# --- verification (upstream's pdbStates) -----------------------------------------------------------------------


def status_of(client: FakeClient, key: str) -> dict[str, Any]:
    return dict(client.statuses[key].get("status") or {})


def verify_pdb_status(client: FakeClient, key: str, disruptions_allowed: int, current_healthy: int,
                      desired_healthy: int, expected_pods: int, disrupted_pods: Mapping[str, str] | None = None
                      ) -> None:
    """Every status field as expected (empty maps equal missing ones), and the condition agreeing."""
    pdb = client.statuses[key]
    status = dict(pdb.get("status") or {})
    conditions = status.pop("conditions", None)
    want: dict[str, Any] = {"disruptionsAllowed": disruptions_allowed, "currentHealthy": current_healthy,
                            "desiredHealthy": desired_healthy, "expectedPods": expected_pods}
    if disrupted_pods:
        want["disruptedPods"] = dict(disrupted_pods)
    generation = pdb["metadata"].get("generation")
    if generation:
        want["observedGeneration"] = generation
    assert status == want
    cond = find_condition(conditions, DISRUPTION_ALLOWED_CONDITION)
    assert cond is not None, f"expected condition {DISRUPTION_ALLOWED_CONDITION}"
    assert cond["status"] == ("True" if disruptions_allowed > 0 else "False")


def verify_disruption_allowed(client: FakeClient, key: str, disruptions_allowed: int) -> None:
    assert status_of(client, key)["disruptionsAllowed"] == disruptions_allowed
