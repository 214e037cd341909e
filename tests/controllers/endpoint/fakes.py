"""Test doubles for the Endpoints controller, after upstream's endpoints_controller_test.go helpers: a client that
keeps Endpoints in memory and records every request (upstream's fake handler counts them), caches filled by hand
(upstream's tests add to the informer stores), and pod/service builders (``testPod``, ``addPods``).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time, key_of
from controller_manager.api.resources import ENDPOINTS, PODS, SERVICES, Resource
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.endpoint import EndpointsController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.informers import SharedInformerFactory

Obj = dict[str, Any]
T0 = 1_700_000_000.0
IPV4 = ["IPv4"]
IPV6 = ["IPv6"]
IPV4_IPV6 = ["IPv4", "IPv6"]
IPV6_IPV4 = ["IPv6", "IPv4"]


@dataclass
class Recorded:
    """Events as (object name, type, reason, message)."""

    events: list[tuple[str, str, str, str]] = field(default_factory=list)

    def recorder(self, component: str) -> Recorded:
        return self

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((str((obj.get("metadata") or {}).get("name", "")), type, reason, message))


@dataclass
class FakeClient:
    """Endpoints in memory; ``requests`` lists (verb, namespace, name, body) of every request, in order."""

    endpoints: dict[str, Obj] = field(default_factory=dict)
    requests: list[tuple[str, str, str, Any]] = field(default_factory=list)
    fail: dict[str, ApiError] = field(default_factory=dict)  # verb -> error to raise
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def verbs(self) -> list[str]:
        return [r[0] for r in self.requests]

    def body(self, index: int = -1) -> Obj:
        body: Obj = self.requests[index][3]
        return body

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        assert res == ENDPOINTS
        body = copy.deepcopy(dict(obj))
        self.requests.append(("create", namespace or "", body["metadata"]["name"], body))
        if "create" in self.fail:
            raise self.fail["create"]
        stored = copy.deepcopy(body)
        stored["metadata"]["namespace"] = namespace
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.endpoints[key_of(stored)] = stored
        return copy.deepcopy(stored)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        assert res == ENDPOINTS
        body = copy.deepcopy(dict(obj))
        m = body["metadata"]
        self.requests.append(("update", m.get("namespace") or "", m["name"], body))
        if "update" in self.fail:
            raise self.fail["update"]
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.endpoints[key_of(stored)] = stored
        return copy.deepcopy(stored)

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **_: Any) -> Obj:
        assert res == ENDPOINTS
        self.requests.append(("delete", namespace or "", name, None))
        if self.endpoints.pop(f"{namespace}/{name}", None) is None:
            raise NotFound(404, "NotFound", f'endpoints "{name}" not found')
        return {"kind": "Status", "status": "Success"}


@dataclass
class Env:
    ctrl: EndpointsController
    client: FakeClient
    clock: FakeClock
    events: Recorded

    def add(self, res: Resource, *objs: Obj) -> None:
        """Put objects in the controller's cache (upstream's ``store.Add``)."""
        store = self.ctrl.ctx.informers.informer(res).store
        for obj in objs:
            store._put(key_of(obj), copy.deepcopy(obj))

    def remove(self, res: Resource, obj: Obj) -> None:
        self.ctrl.ctx.informers.informer(res).store._remove(key_of(obj))

    def add_endpoints(self, *objs: Obj) -> None:
        """Endpoints in the cache and on the fake server alike."""
        for obj in objs:
            self.client.endpoints[key_of(obj)] = copy.deepcopy(obj)
        self.add(ENDPOINTS, *objs)

    def add_pods(self, namespace: str, n_pods: int, n_ports: int, n_not_ready: int,
                 families: list[str] = IPV4) -> None:
        """``addPods``: ``n_pods`` ready pods then ``n_not_ready`` not-ready ones, labelled foo=bar."""
        self.add(PODS, *(make_pod(namespace, i, n_ports, i < n_pods, families) for i in range(n_pods + n_not_ready)))

    def add_service(self, service: Obj) -> None:
        self.add(SERVICES, service)


def new_env(batch_period: float = 0.0) -> Env:
    clock = FakeClock(T0)
    client = FakeClient()
    events = Recorded()
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock, events=events,  # type: ignore[arg-type]
                            options={"endpoint_updates_batch_period": batch_period})
    return Env(EndpointsController(ctx), client, clock, events)


def make_pod(namespace: str, i: int, n_ports: int, ready: bool, families: list[str] = IPV4) -> Obj:
    """``testPod``: pod<i>, labels foo=bar, resourceVersion i, container ports port<j> = 8080+j, IPs by id."""
    ips = [f"1.2.{3 + (4 + i) // 256}.{(4 + i) % 256}" if family == "IPv4" else f"2000::{4 + i:x}"
           for family in families]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": namespace, "name": f"pod{i}", "labels": {"foo": "bar"}, "resourceVersion": str(i)},
        "spec": {"containers": [{"ports": [{"name": f"port{j}", "containerPort": 8080 + j}
                                           for j in range(n_ports)]}]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "podIP": ips[0], "podIPs": [{"ip": ip} for ip in ips]},
    }


def service(namespace: str, *, selector: dict[str, str] | None = None, ports: list[Obj] | None = None,
            name: str = "foo", families: list[str] | None = IPV4, **spec: Any) -> Obj:
    body: Obj = {**spec}
    if selector is not None:
        body["selector"] = selector
    if ports is not None:
        body["ports"] = ports
    if families is not None:
        body["ipFamilies"] = families
    labels = body.pop("labels", None)
    created = body.pop("created", None)
    m: Obj = {"name": name, "namespace": namespace}
    if labels is not None:
        m["labels"] = labels
    if created is not None:
        m["creationTimestamp"] = format_time(created)
    return {"apiVersion": "v1", "kind": "Service", "metadata": m, "spec": body}


def endpoints(namespace: str, subsets: list[Obj] | None, *, name: str = "foo", rv: str = "1",
              labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Obj:
    m: Obj = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if labels is not None:
        m["labels"] = labels
    if annotations is not None:
        m["annotations"] = annotations
    obj: Obj = {"apiVersion": "v1", "kind": "Endpoints", "metadata": m}
    if subsets is not None:
        obj["subsets"] = subsets
    return obj


def address(ip: str, pod: str | None, namespace: str, node: str = "") -> Obj:
    """An address as the controller writes it (nodeName always set, as upstream's pointer)."""
    a: Obj = {"ip": ip, "nodeName": node}
    if pod is not None:
        a["targetRef"] = {"kind": "Pod", "namespace": namespace, "name": pod}
    return a
