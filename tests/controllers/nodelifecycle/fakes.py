"""In-memory stand-ins for the node lifecycle, taint eviction and pod GC unit tests.

Controllers get a real SharedInformerFactory that is never run: tests put objects in its caches by hand (as
upstream's tests fill informer indexers), and :class:`FakeClient` keeps the "server" state, applies the few
writes these controllers make, records them, and mirrors node writes into the caches (``mirror``) so a
controller sees its own writes as it would through a watch.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time, key_of
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.clock import FakeClock
from controller_manager.runtime.controller import Controller, ControllerContext
from controller_manager.runtime.informers import SharedInformer, SharedInformerFactory

Obj = dict[str, Any]
T0 = 1_700_000_000.0


@dataclass
class Recorded:
    """Events as (object name, type, reason, message)."""

    events: list[tuple[str, str, str, str]] = field(default_factory=list)

    def recorder(self, component: str) -> Recorded:
        return self

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((str((obj.get("metadata") or {}).get("name", "")), type, reason, message))

    def reasons(self) -> list[str]:
        return [e[2] for e in self.events]


@dataclass
class FakeClient:
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)  # (plural, ns/name or name) -> object
    writes: list[tuple[str, str, str, Any]] = field(default_factory=list)  # (verb, plural, key, body)
    fail: dict[tuple[str, str], ApiError] = field(default_factory=dict)  # (verb, plural) -> error to raise
    mirror: Callable[[Resource, Obj | None, str], None] | None = None
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def put(self, plural: str, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
        self.objects[(plural, key_of(obj))] = obj
        return obj

    def _key(self, name: str, namespace: str | None) -> str:
        return f"{namespace}/{name}" if namespace else name

    def _check(self, verb: str, res: Resource) -> None:
        err = self.fail.get((verb, res.plural))
        if err is not None:
            raise err

    def _store(self, res: Resource, obj: Obj) -> Obj:
        stored = self.put(res.plural, obj)
        if self.mirror is not None:
            self.mirror(res, copy.deepcopy(stored), key_of(stored))
        return stored

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        self._check("get", res)
        obj = self.objects.get((res.plural, self._key(name, namespace)))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return copy.deepcopy(obj)

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> Obj:
        self._check("patch", res)
        key = self._key(name, namespace)
        self.writes.append(("patch" if subresource is None else f"patch/{subresource}", res.plural, key, patch))
        current = await self.get(res, name, namespace)
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        new = copy.deepcopy(current)
        for section in ("spec", "status"):
            for field_name, value in (patch.get(section) or {}).items():
                target = new.setdefault(section, {})
                if field_name == "conditions" and patch_type == "strategic":
                    kept = [c for c in target.get("conditions") or () if c["type"] not in {v["type"] for v in value}]
                    target["conditions"] = kept + list(value)
                elif value is None:
                    target.pop(field_name, None)
                else:
                    target[field_name] = value
        labels = (patch.get("metadata") or {}).get("labels")
        if labels:
            new["metadata"].setdefault("labels", {}).update(labels)
        return self._store(res, new)

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        self._check("update_status", res)
        key = key_of(obj)
        self.writes.append(("update_status", res.plural, key, obj))
        current = self.objects.get((res.plural, key))
        if current is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{key}" not found')
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self._store(res, {**current, "status": copy.deepcopy(obj.get("status"))})

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **options: Any) -> Obj:
        key = self._key(name, namespace)
        self.writes.append(("delete", res.plural, key, options))
        self._check("delete", res)
        if self.objects.pop((res.plural, key), None) is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        if self.mirror is not None:
            self.mirror(res, None, key)
        return {"kind": "Status", "status": "Success"}

    def verbs(self, plural: str | None = None) -> list[tuple[str, str]]:
        return [(verb, key) for verb, p, key, _ in self.writes if plural is None or p == plural]


def build(kind: type[Controller], options: Mapping[str, Any] | None = None, *,
          start: float = T0) -> tuple[Any, FakeClient, FakeClock, Recorded]:
    """A controller of ``kind`` on a FakeClock, a FakeClient mirroring its writes into the caches, and events."""
    clock = FakeClock(start)
    client = FakeClient()
    events = Recorded()
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock, events=events,  # type: ignore[arg-type]
                            options=dict(options or {}))
    ctrl = kind(ctx)

    def mirror(res: Resource, obj: Obj | None, key: str) -> None:
        store = factory.informer(res).store
        if obj is None:
            store._remove(key)
        else:
            store._put(key, obj)

    client.mirror = mirror
    return ctrl, client, clock, events


def cache(informer: SharedInformer, *objs: Obj) -> None:
    for obj in objs:
        informer.store._put(key_of(obj), obj)


def seed(ctrl: Any, client: FakeClient, res: Resource, *objs: Obj) -> list[Obj]:
    """Objects on the fake server and in the controller's cache (same resourceVersion)."""
    stored = [client.put(res.plural, o) for o in objs]
    cache(ctrl.ctx.informers.informer(res), *stored)
    return stored


def node(name: str, *, zone: str = "zone-a", region: str = "region-1", ready: str | None = "True",
         heartbeat: float = T0, transition: float = T0, created: float = T0 - 3600,
         taints: list[Obj] | None = None, unschedulable: bool = False,
         conditions: list[Any] | None = None, labels: Mapping[str, str] | None = None) -> Obj:
    all_labels = {"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": region, **(labels or {})}
    conds: list[Any] = [] if ready is None else [
        {"type": "Ready", "status": ready, "lastHeartbeatTime": format_time(heartbeat),
         "lastTransitionTime": format_time(transition), "reason": "KubeletReady", "message": "ok"}]
    if conditions is not None:
        conds = conds + conditions
    spec: Obj = {}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": all_labels,
                         "creationTimestamp": format_time(created)},
            "spec": spec, "status": {"conditions": conds}}


def pod(name: str, node_name: str = "", *, namespace: str = "default", ready: bool = True,
        tolerations: list[Obj] | None = None, phase: str = "Running", created: float = T0 - 600,
        deleting: bool = False, reason: str | None = None) -> Obj:
    status: Obj = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                   "lastTransitionTime": format_time(created)}]}
    if reason:
        status["reason"] = reason
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "creationTimestamp": format_time(created)}
    if deleting:
        meta["deletionTimestamp"] = format_time(created + 1)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name, "tolerations": tolerations or [], "containers": [{"name": "c"}]},
            "status": status}
