"""Node ports of Services, allocated as the real registry does (``pkg/registry/core/service/storage/alloc.go``
with the default ``--service-node-port-range`` 30000-32767).

Guarantees:
- NodePort Services, and LoadBalancer Services unless ``allocateLoadBalancerNodePorts: false``, get a node port
  for every port without one: a random free port of the range; two ports of one Service with the same number
  (different protocols) share it. A LoadBalancer Service with ``externalTrafficPolicy: Local`` also gets a
  ``healthCheckNodePort``.
- A requested port must lie in the range and be free, else 422 ``spec.ports[0].nodePort: Invalid value: 30001:
  provided port is already allocated`` / ``provided port is not in the valid range. The range of valid ports is
  30000-32767``.
- Ports in use are those the stored Services hold, so deleting a Service releases its ports; an update that
  changes the type to one without node ports (and leaves the ports as they were) drops them (the strategy's
  dropTypeDependentFields), which releases them too.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.resources import SERVICES
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.validation_errors import FieldError, invalid, invalid_status

Obj = dict[str, Any]

LOW, HIGH = 30000, 32767
_RANGE_TEXT = f"{LOW}-{HIGH}"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def needs_node_ports(spec: Mapping[str, Any]) -> bool:
    kind = spec.get("type")
    return kind == "NodePort" or (kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)


def held_by(svc: Mapping[str, Any]) -> set[int]:
    """The node ports a stored Service holds."""
    spec = _dict(svc.get("spec"))
    held = {p["nodePort"] for p in (_dict(p) for p in spec.get("ports") or ()) if isinstance(p.get("nodePort"), int)}
    if isinstance(spec.get("healthCheckNodePort"), int) and spec["healthCheckNodePort"]:
        held.add(spec["healthCheckNodePort"])
    return held


def in_use(services: Iterable[Mapping[str, Any]]) -> set[int]:
    used: set[int] = set()
    for svc in services:
        used |= held_by(svc)
    return used


def _same_ports(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return [_dict(p).get("nodePort") for p in a.get("ports") or ()] == \
        [_dict(p).get("nodePort") for p in b.get("ports") or ()]


def _patch_allocated(ports: list[Obj], spec: Obj, old_spec: Mapping[str, Any]) -> None:
    """An update that leaves node ports out keeps the ones the same-named ports held (patchAllocatedValues),
    unless another port of the update now states that number."""
    old_ports = [_dict(p) for p in old_spec.get("ports") or ()]
    stated = {p.get("nodePort") for p in ports if p.get("nodePort")}
    by_name = {str(p.get("name") or ""): p.get("nodePort") for p in old_ports}
    for p in ports:
        previous = by_name.get(str(p.get("name") or ""))
        if not p.get("nodePort") and previous and previous not in stated:
            p["nodePort"] = previous
    if not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def _pick(used: set[int]) -> int:
    free = HIGH - LOW + 1 - len([p for p in used if LOW <= p <= HIGH])
    if free <= 0:
        raise errors.StatusError(invalid_status(SERVICES, "", [invalid("spec.ports", [], "range is full")]))
    while True:
        port = random.randint(LOW, HIGH)
        if port not in used:
            return port


def assign(obj: Obj, old: Obj | None, used: set[int]) -> Obj:
    """``obj`` (a defaulted Service being created, or updated over ``old``) with its node ports; ``used``: the
    ports the other Services hold."""
    spec = dict(_dict(obj.get("spec")))
    old_spec = _dict((old or {}).get("spec"))
    name = str(_dict(obj.get("metadata")).get("name") or "")
    ports = [dict(_dict(p)) for p in spec.get("ports") or ()]
    if old is not None and needs_node_ports(old_spec) and not needs_node_ports(spec) and _same_ports(spec, old_spec):
        for p in ports:
            p.pop("nodePort", None)
        spec.pop("healthCheckNodePort", None)
        return {**obj, "spec": {**spec, "ports": ports}} if ports else {**obj, "spec": spec}
    if old is not None and needs_node_ports(old_spec) and needs_node_ports(spec):
        _patch_allocated(ports, spec, old_spec)
    taken = set(used)
    mine = held_by(old) if old is not None else set()
    errs: list[FieldError] = []
    for i, p in enumerate(ports):
        requested = p.get("nodePort")
        if not isinstance(requested, int) or not requested or requested in mine:
            continue
        if not LOW <= requested <= HIGH:
            errs.append(invalid(f"spec.ports[{i}].nodePort", requested,
                                "provided port is not in the valid range. The range of valid ports is " + _RANGE_TEXT))
        elif requested in taken:
            errs.append(invalid(f"spec.ports[{i}].nodePort", requested, "provided port is already allocated"))
        taken.add(requested)
    if errs:
        raise errors.StatusError(invalid_status(SERVICES, name, errs))
    if needs_node_ports(spec):
        by_number: dict[Any, int] = {p.get("port"): p["nodePort"] for p in ports if p.get("nodePort")}
        for p in ports:
            if p.get("nodePort"):
                continue
            port = by_number.get(p.get("port")) or _pick(taken | mine)
            taken.add(port)
            by_number[p.get("port")] = port
            p["nodePort"] = port
        if spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local" \
                and not spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = _pick(taken | mine)
    return {**obj, "spec": {**spec, "ports": ports}} if ports else {**obj, "spec": spec}
