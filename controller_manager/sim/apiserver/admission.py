"""The admission chain kube-sim runs on creates, in the real apiserver's plugin order.

Mutating (after the request's defaults): LimitRanger's container defaults, then Priority; DefaultStorageClass
on claims and DefaultIngressClass on Ingresses. Validating (after the registry's own validation): Priority on
PriorityClasses, LimitRanger's min/max/ratio checks, then ResourceQuota. The plugins that apply to one kind
only are run by that kind's strategy (:mod:`registry`).
NamespaceLifecycle lives in the server (it also guards updates); the other upstream plugins whose effect kube-sim
shows (ServiceAccount's name, DefaultTolerationSeconds) are applied with the defaults.

Guarantees: every plugin reads the objects as stored (quotas, limit ranges, priority classes of the namespace or
cluster); :func:`validate` stores nothing and returns the quota usage to record once the object is created;
:func:`record_quota_usage` writes it through each quota's ``/status``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api.resource_lists import ResourceList, render
from controller_manager.api.resources import LIMITRANGES, RESOURCEQUOTAS, Resource
from controller_manager.sim.apiserver import limitranger, quota
from controller_manager.sim.apiserver.registry import strategy_for
from controller_manager.sim.apiserver.registry.base import stored_objects

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
QuotaChanges = list[tuple[Obj, ResourceList]]


def mutate(api: ApiServer, res: Resource, obj: Obj, namespace: str | None) -> Obj:
    """The mutating plugins on a create (the kind's strategy knows which apply): ``obj`` (the create's own
    defaulted copy, which they may change in place) or what they made of it."""
    return strategy_for(res).mutating_admission(api, obj, namespace)


def validate(api: ApiServer, res: Resource, obj: Obj, namespace: str | None, *, old: Obj | None = None,
             create: bool) -> QuotaChanges:
    """The validating plugins on a create, or an update of the main resource over ``old``; raises the first
    refusal, returns the quota usage the write adds."""
    strategy_for(res).validating_admission(api, obj)
    if not res.namespaced or not namespace or (not create and old is None):
        return []
    name = str(obj["metadata"].get("name") or "")
    if create:
        limitranger.admit(res, obj, name, stored_objects(api, LIMITRANGES, namespace))
    elif not quota.handles_update(res):
        return []
    return quota.check(res, obj, name, stored_objects(api, RESOURCEQUOTAS, namespace), None if create else old)


def record_quota_usage(api: ApiServer, changes: QuotaChanges) -> None:
    for stored, used in changes:
        meta = stored["metadata"]
        status = {**(stored.get("status") or {}), "used": {**(stored.get("status") or {}).get("used", {}),
                                                            **render(used)}}
        api.update(RESOURCEQUOTAS, {**stored, "status": status}, subresource="status",
                   namespace=meta.get("namespace"), name=meta["name"])

