"""The admission chain kube-sim runs on creates, in the real apiserver's plugin order.

Mutating (after the request's defaults): LimitRanger's container defaults, then Priority; DefaultStorageClass
on claims and DefaultIngressClass on Ingresses. Validating (after the
registry's own validation): Priority on PriorityClasses, LimitRanger's min/max/ratio checks, then ResourceQuota.
NamespaceLifecycle lives in the server (it also guards updates); the other upstream plugins whose effect kube-sim
shows (ServiceAccount's name, DefaultTolerationSeconds) are applied with the defaults.

Guarantees: every plugin reads the objects as stored (quotas, limit ranges, priority classes of the namespace or
cluster); :func:`validate` stores nothing and returns the quota usage to record once the object is created;
:func:`record_quota_usage` writes it through each quota's ``/status``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from controller_manager.api.resource_lists import ResourceList, render
from controller_manager.api.resources import (
    INGRESSCLASSES,
    LIMITRANGES,
    PRIORITYCLASSES,
    RESOURCEQUOTAS,
    STORAGECLASSES,
    Resource,
)
from controller_manager.sim.apiserver import limitranger, networking, priority, quota, storage_kinds

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
QuotaChanges = list[tuple[Obj, ResourceList]]


def _is_pod(res: Resource) -> bool:
    return res.group == "" and res.plural == "pods"


def _objects(api: ApiServer, res: Resource, namespace: str | None) -> list[Obj]:
    """The stored objects themselves, not copies: every plugin only reads them (this runs on every pod create)."""
    if api.lookup(res.group, res.version, res.plural) is None:
        return []
    return [stored.obj for stored in api.store(res).iter_from(namespace)]


def mutate(api: ApiServer, res: Resource, obj: Obj, namespace: str | None) -> Obj:
    """The mutating plugins on a create: ``obj`` itself when none applies, else a changed copy."""
    if not (_is_pod(res) or (res.group == "" and res.plural == "persistentvolumeclaims")
            or (res.group == INGRESSCLASSES.group and res.kind == "Ingress")):
        return obj
    obj = orjson.loads(orjson.dumps(obj))
    if _is_pod(res):
        limitranger.mutate_pod(obj, _objects(api, LIMITRANGES, namespace))
        priority.admit_pod(obj, _objects(api, PRIORITYCLASSES, None))
    elif res.group == "" and res.plural == "persistentvolumeclaims":
        storage_kinds.admit_claim(obj, _objects(api, STORAGECLASSES, None))
    elif res.group == INGRESSCLASSES.group and res.kind == "Ingress":
        networking.admit_ingress(obj, _objects(api, INGRESSCLASSES, None))
    return obj


def validate(api: ApiServer, res: Resource, obj: Obj, namespace: str | None, *, old: Obj | None = None,
             create: bool) -> QuotaChanges:
    """The validating plugins on a create, or an update of the main resource over ``old``; raises the first
    refusal, returns the quota usage the write adds."""
    if res.group == PRIORITYCLASSES.group and res.kind == PRIORITYCLASSES.kind:
        priority.admit_class(obj, _objects(api, PRIORITYCLASSES, None))
    if not res.namespaced or not namespace or (not create and old is None):
        return []
    name = str(obj["metadata"].get("name") or "")
    if create:
        limitranger.admit(res, obj, name, _objects(api, LIMITRANGES, namespace))
    elif not quota.handles_update(res):
        return []
    return quota.check(res, obj, name, _objects(api, RESOURCEQUOTAS, namespace), None if create else old)


def record_quota_usage(api: ApiServer, changes: QuotaChanges) -> None:
    for stored, used in changes:
        meta = stored["metadata"]
        status = {**(stored.get("status") or {}), "used": {**(stored.get("status") or {}).get("used", {}),
                                                            **render(used)}}
        api.update(RESOURCEQUOTAS, {**stored, "status": status}, subresource="status",
                   namespace=meta.get("namespace"), name=meta["name"])

