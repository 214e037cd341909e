"""Subresources with their own shapes: ``/scale``, ``pods/binding`` and ``pods/eviction``.

Guarantees:
- ``/scale`` (kinds whose strategy serves it: deployments, replicasets, statefulsets, replication controllers,
  custom resources with a scale subresource) reads and writes an autoscaling/v1 Scale:
  ``spec.replicas``, ``status.replicas`` and ``status.selector`` (the selector's string form). A write
  changes only ``spec.replicas`` of the owner, through the normal update (generation bumps, conflicts on
  a stale resourceVersion).
- ``binding`` sets ``spec.nodeName``, adds the binding's annotations and a ``PodScheduled=True``
  condition; a pod already bound or being deleted gives 409 on ``pods/binding``.
- ``eviction`` deletes the pod unless the one PodDisruptionBudget selecting it allows no disruption
  (429 with a ``DisruptionBudget`` cause) or has not yet been observed by its controller (429,
  retry after 10s); more than one PDB is a 500, as upstream. A successful eviction records the pod in
  the PDB's ``status.disruptedPods``, decrements ``disruptionsAllowed``, and adds the ``DisruptionTarget``
  condition (reason ``EvictionByEvictionAPI``) to the pod's status before deleting it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api import selectors
from controller_manager.api.meta import format_time
from controller_manager.api.resources import PODDISRUPTIONBUDGETS, PODS, Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.deletion import DeleteOptions, delete
from controller_manager.sim.apiserver.fieldmanager.typed import MISSING
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry import strategy_for

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def _check_scale_kind(res: Resource) -> None:
    if not strategy_for(res).has_scale or "scale" not in res.subresources:
        raise errors.path_not_found()


def get_scale(api: ApiServer, res: Resource, namespace: str | None, name: str) -> Obj:
    _check_scale_kind(res)
    return strategy_for(res).scale_of(res, api.get_stored(res, namespace, name).obj)


def update_scale(api: ApiServer, res: Resource, namespace: str | None, name: str, scale: Any, *,
                 dry_run: bool = False, field_manager: str | None = None, managed_fields: Any = MISSING) -> Obj:
    """``managed_fields``: the parent's entries as server-side apply to the Scale left them."""
    _check_scale_kind(res)
    if not isinstance(scale, dict):
        raise errors.bad_request("the object provided is not a JSON object")
    meta = scale.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                 f"({name})")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid("autoscaling", "Scale", name, [
            ("FieldValueInvalid", "spec.replicas",
             f"spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0")])
    existing = api.get_stored(res, namespace, name)
    rv = meta.get("resourceVersion")
    if rv and str(rv) != str(existing.rv):
        raise errors.conflict(res.group, res.plural, name)
    updated = strategy_for(res).with_replicas(res, existing.obj, replicas)
    result = api.update(res, updated, namespace=namespace, name=name, dry_run=dry_run, field_manager=field_manager,
                        manager_subresource="scale", managed_fields=managed_fields)
    return strategy_for(res).scale_of(res, result)


def patch_scale(api: ApiServer, res: Resource, namespace: str | None, name: str, patch: Any, patch_type: str, *,
                dry_run: bool = False, field_manager: str | None = None) -> Obj:
    from controller_manager.sim.apiserver import patch as patching

    current = get_scale(api, res, namespace, name)
    try:
        patched = patching.apply_patch(current, patch, patch_type, "Scale")
    except patching.PatchError as e:
        raise errors.StatusError(e.status()) from None
    return update_scale(api, res, namespace, name, patched, dry_run=dry_run, field_manager=field_manager)


def bind(api: ApiServer, namespace: str, name: str, binding: Any, *, dry_run: bool = False) -> Obj:
    """POST pods/<name>/binding; returns the 201 Success Status."""
    if not isinstance(binding, dict):
        raise errors.bad_request("the object provided is not a JSON object")
    meta = binding.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid("", "Binding", name, [
            ("FieldValueNotSupported", "target.kind",
             f'target.kind: Unsupported value: "{target.get("kind")}": supported values: "Node"')])
    node = target.get("name") or ""
    if not node:
        raise errors.invalid("", "Binding", name, [("FieldValueRequired", "target.name",
                                                   "target.name: Required value")])
    existing = api.get_stored(PODS, namespace, name)
    pod = existing.obj
    pmeta = pod["metadata"]
    if meta.get("uid") and meta["uid"] != pmeta.get("uid"):
        raise errors.conflict("", "pods", name, f"Precondition failed: UID in precondition: {meta['uid']}, "
                                                f"UID in object meta: {pmeta.get('uid')}")
    why = None
    if pmeta.get("deletionTimestamp"):
        why = f"pod {name} is being deleted, cannot be assigned to a host"
    elif (pod.get("spec") or {}).get("nodeName"):
        why = f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
    elif (pod.get("spec") or {}).get("schedulingGates"):
        why = f"pod {name} has non-empty .spec.schedulingGates"
    if why:
        raise errors.conflict("", "pods/binding", name, why)
    annotations = {**(pmeta.get("annotations") or {}), **(meta.get("annotations") or {})}
    new_meta = {**pmeta}
    if annotations:
        new_meta["annotations"] = annotations
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    old_cond = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
    now = format_time(api.clock.now())
    cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": old_cond.get("lastTransitionTime") if old_cond and old_cond.get("status") == "True"
            else now}
    status["conditions"] = [*conditions, cond]
    new = {**pod, "metadata": new_meta, "spec": {**pod["spec"], "nodeName": node}, "status": status}
    api.admit_namespace(PODS, namespace, name, create=False)
    api._commit(api.store(PODS), existing.key, new, dry_run)
    return errors.success(201)


def evict(api: ApiServer, namespace: str, name: str, eviction: Any, *, dry_run: bool = False) -> Obj:
    """POST pods/<name>/eviction; returns the 201 Success Status."""
    if not isinstance(eviction, dict):
        raise errors.bad_request("the object provided is not a JSON object")
    meta = eviction.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    opts = eviction.get("deleteOptions") or {}
    pod = api.get_stored(PODS, namespace, name).obj
    options = DeleteOptions(opts.get("gracePeriodSeconds"), opts.get("propagationPolicy"),
                            opts.get("orphanDependents"), dict(opts.get("preconditions") or {}),
                            dry_run or "All" in (opts.get("dryRun") or []))
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
        _add_condition_and_delete(api, namespace, name, options)
        return errors.success(201)
    pdbs = _pdbs_for(api, namespace, pod)
    if len(pdbs) > 1:
        raise errors.internal_error("This pod has more than one PodDisruptionBudget, which the eviction "
                                    "subresource does not support.")
    if pdbs:
        _check_and_decrement(api, pdbs[0], name, dry_run=options.dry_run)
    _add_condition_and_delete(api, namespace, name, options)
    return errors.success(201)


def _add_condition_and_delete(api: ApiServer, namespace: str, name: str, options: DeleteOptions) -> None:
    """eviction.go's addConditionAndDeletePod: the pod gets DisruptionTarget=True (reason EvictionByEvictionAPI)
    in its status first, so whoever sees it go knows why (Job pod failure policies, the disruption controller)."""
    pod = api.get_stored(PODS, namespace, name).obj
    status = pod.get("status") or {}
    if not options.dry_run:
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": format_time(api.clock.now()), "reason": "EvictionByEvictionAPI",
                           "message": "Eviction API: evicting"})
        api.update(PODS, {**pod, "status": {**status, "conditions": conditions}}, subresource="status")
    delete(api, PODS, namespace, name, options)


def _pdbs_for(api: ApiServer, namespace: str, pod: Obj) -> list[Obj]:
    labels = pod["metadata"].get("labels") or {}
    found = []
    for stored in api.store(PODDISRUPTIONBUDGETS).iter_from(namespace):
        try:
            sel = selectors.from_label_selector((stored.obj.get("spec") or {}).get("selector"))
        except selectors.InvalidSelector:
            continue
        if sel.is_empty() or not sel.matches(labels):
            continue
        found.append(stored.obj)
    return found


def _check_and_decrement(api: ApiServer, pdb: Obj, pod_name: str, *, dry_run: bool) -> None:
    meta = pdb["metadata"]
    status = dict(pdb.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise errors.too_many_requests(EVICTION_REFUSED, 10, [
            {"reason": "DisruptionBudget",
             "message": f"The disruption budget {meta['name']} is still being processed by the server."}])
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden("policy", "poddisruptionbudget", meta["name"], "pdb disruptions allowed is negative")
    if allowed == 0:
        raise errors.too_many_requests(EVICTION_REFUSED, 0, [
            {"reason": "DisruptionBudget",
             "message": f"The disruption budget {meta['name']} needs {int(status.get('desiredHealthy') or 0)} "
                        f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently"}])
    status["disruptionsAllowed"] = allowed - 1
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: format_time(api.clock.now())}
    api.update(PODDISRUPTIONBUDGETS, {**pdb, "status": status}, subresource="status", dry_run=dry_run)
