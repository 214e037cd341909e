"""Each kind's registry rules, as upstream's ``pkg/registry/<group>/<kind>/strategy.go``: one
:class:`~.base.Strategy` per kind, in a module per API group; :func:`strategy_for` finds a resource's.

Where a kind's rules live:

- the generic store (every kind's default): :mod:`.base`
- core/v1 (Pod, Service, Namespace, Node, PersistentVolume[Claim], ReplicationController, ServiceAccount,
  Event, Endpoints, LimitRange, ResourceQuota, PodTemplate): :mod:`.core`
- apps/v1: :mod:`.apps`; batch/v1: :mod:`.batch`; policy/v1: :mod:`.policy`; autoscaling: :mod:`.autoscaling`
- discovery.k8s.io: :mod:`.discovery`; networking.k8s.io: :mod:`.networking`; node.k8s.io: :mod:`.node`;
  scheduling.k8s.io:
  :mod:`.scheduling`; coordination.k8s.io: :mod:`.coordination`; rbac.authorization.k8s.io: :mod:`.rbac`;
  storage.k8s.io: :mod:`.storage`; resource.k8s.io (dynamic resource allocation): :mod:`.resource`
- flowcontrol.apiserver.k8s.io (API Priority and Fairness): :mod:`.flowcontrol`
- admissionregistration.k8s.io: :mod:`.admissionregistration`; certificates.k8s.io: :mod:`.certificates`
- events.k8s.io: :mod:`.events`; the review kinds of authentication/authorization.k8s.io:
  :mod:`.authentication`; metrics.k8s.io: :mod:`.metrics`
- CustomResourceDefinitions and every custom resource: :mod:`.apiextensions`; APIServices: :mod:`.apiregistration`

A strategy names its kind's validation (name rule and field rules) and calls the functions that implement
it, which stay beside the types they check (``validation``, ``validation_pods``, ``validation_workloads``,
``storage_kinds``, ``networking``...), as upstream's ``pkg/apis/<group>/validation``. Defaulting
(``defaults``) runs before any strategy step, as upstream's scheme defaulting does.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.registry import (
    admissionregistration,
    apiextensions,
    apiregistration,
    apps,
    authentication,
    autoscaling,
    batch,
    certificates,
    coordination,
    core,
    discovery,
    events,
    flowcontrol,
    metrics,
    networking,
    node,
    policy,
    rbac,
    resource,
    scheduling,
    storage,
)
from controller_manager.sim.apiserver.registry.base import Strategy, Write

__all__ = ["GENERIC", "Strategy", "Write", "registered", "status_reset_meta", "strategy_for"]

GENERIC = Strategy()
_BY_KIND: dict[tuple[str, str], Strategy] = {}
for _module in (core, apps, batch, policy, autoscaling, discovery, networking, node, scheduling, coordination,
                rbac, storage, resource, flowcontrol, admissionregistration, certificates, events, authentication,
                metrics, apiextensions, apiregistration):
    for _strategy in _module.STRATEGIES:
        assert (_strategy.group, _strategy.kind) not in _BY_KIND, (_strategy.group, _strategy.kind)
        _BY_KIND[(_strategy.group, _strategy.kind)] = _strategy


def strategy_for(res: Resource) -> Strategy:
    """The strategy of ``res``'s kind: custom resources share one, unlisted kinds get the generic store's."""
    if isinstance(res, CustomResource):
        return apiextensions.CUSTOM_RESOURCE
    return _BY_KIND.get((res.group, res.kind), GENERIC)


def registered() -> Mapping[tuple[str, str], Strategy]:
    """Every kind's own strategy, by (group, kind)."""
    return MappingProxyType(_BY_KIND)


@functools.cache
def status_reset_meta() -> dict[str, tuple[str, ...]]:
    """The metadata each kind's status strategy resets, by kind (for readers that only know the kind)."""
    return {s.kind: s.status_reset_meta for s in _BY_KIND.values() if s.status_reset_meta}
