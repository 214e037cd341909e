"""Per-kind write rules, as each registry's strategy (``pkg/registry/<group>/<kind>/strategy.go``) applies them.

Guarantees (all functions build new dicts; inputs are never mutated):
- Create clears server-owned status (Pods start ``Pending`` with their QoS class, Namespaces ``Active``
  with the ``kubernetes`` finalizer in ``spec.finalizers``; Nodes keep the status their kubelet sends)
  and starts ``metadata.generation`` at 1 for kinds that track it.
- A main-resource update keeps the stored status; ``generation`` is bumped only when the spec changes
  (Deployments: also on annotation changes). A ``/status`` update keeps the stored spec and the
  metadata the kind's status strategy resets (labels for apps workloads, ownerReferences for Pods).
- ``/finalize`` on a Namespace changes only ``spec.finalizers``.
- The generic metadata rules of ``rest.BeforeUpdate``: uid, creationTimestamp, deletionTimestamp,
  deletionGracePeriodSeconds and generation cannot be changed by a client.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import Resource

Obj = dict[str, Any]

# Kinds whose metadata.generation the API server maintains.
GENERATION_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob",
                              "PodDisruptionBudget", "Pod", "ReplicationController", "HorizontalPodAutoscaler",
                              "EndpointSlice", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                              "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
# Kinds whose strategy has AllowCreateOnUpdate() true: a PUT to a missing name creates the object
# (core Event, Endpoints, LimitRange, Service; coordination Lease; the four RBAC kinds; events.k8s.io
# Event shares core's strategy). Every other kind answers 404.
CREATE_ON_UPDATE: frozenset[tuple[str, str]] = frozenset({
    ("", "Event"), ("events.k8s.io", "Event"), ("", "Endpoints"), ("", "LimitRange"), ("", "Service"),
    ("coordination.k8s.io", "Lease"), ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding")})
# metadata fields a /status update may not change, per kind (the status strategies' reset fields).
STATUS_RESET_META: dict[str, tuple[str, ...]] = {
    "Deployment": ("labels",),
    "ReplicaSet": ("labels",),
    "StatefulSet": ("labels",),
    "DaemonSet": ("labels",),
    "Pod": ("ownerReferences",),
}
_NOT_SPEC = frozenset({"metadata", "status", "kind", "apiVersion"})
# appsv1.DeprecatedTemplateGeneration: where apps/v1 shows a DaemonSet's internal spec.templateGeneration.
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"


def allows_create_on_update(res: Resource) -> bool:
    return (res.group, res.kind) in CREATE_ON_UPDATE


# Kinds whose strategy refuses an update without a resourceVersion (AllowUnconditionalUpdate false).
_CONDITIONAL_UPDATE_ONLY = frozenset({("coordination.k8s.io", "Lease")})


def allows_unconditional_update(res: Resource) -> bool:
    return (res.group, res.kind) not in _CONDITIONAL_UPDATE_ONLY


def has_status(res: Resource) -> bool:
    return "status" in res.subresources


def spec_of(obj: Obj) -> Obj:
    """Everything a user declares: all top-level fields but metadata, status and type meta."""
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def prepare_for_create(res: Resource, obj: Obj) -> Obj:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    kind = res.kind
    if kind == "Namespace":
        spec = dict(out.get("spec") or {})
        finalizers = list(spec.get("finalizers") or [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        spec["finalizers"] = finalizers
        out["spec"] = spec
        out["status"] = {"phase": "Active"}
    elif kind == "Pod":
        out["status"] = {"phase": "Pending", "qosClass": pod_qos(out)}
    elif has_status(res) and kind != "Node":
        out["status"] = {}
    if kind in GENERATION_KINDS:
        meta["generation"] = 1
    if kind == "DaemonSet":
        # apps/v1 carries the internal spec.templateGeneration in an annotation (its conversion functions).
        annotations = dict(meta.get("annotations") or {})
        annotations[TEMPLATE_GENERATION_ANNOTATION] = str(max(_template_generation(obj), 1))
        meta["annotations"] = annotations
    out["metadata"] = meta
    return out


def prepare_for_update(res: Resource, new: Obj, old: Obj, subresource: str | None) -> Obj:
    """The object to store, from the client's ``new`` and the stored ``old`` (generation not yet final)."""
    if subresource in ("status", "approval"):  # (CSRs' /approval writes status too, see kind_hooks)
        out = {**new, **{k: v for k, v in old.items() if k not in _NOT_SPEC}}
        for k in [k for k in out if k not in _NOT_SPEC and k not in old]:
            del out[k]
        meta = dict(out.get("metadata") or {})
        old_meta = old.get("metadata") or {}
        for field in STATUS_RESET_META.get(res.kind, ()):
            _copy_field(meta, old_meta, field)
        out["metadata"] = meta
    elif subresource == "finalize":
        out = dict(old)
        spec = dict(old.get("spec") or {})
        spec["finalizers"] = list((new.get("spec") or {}).get("finalizers") or [])
        out["spec"] = spec
    else:
        out = dict(new)
        if has_status(res):
            if "status" in old:
                out["status"] = old["status"]
            else:
                out.pop("status", None)
        if res.kind == "Namespace":
            spec = dict(out.get("spec") or {})
            old_finalizers = (old.get("spec") or {}).get("finalizers")
            if old_finalizers is None:
                spec.pop("finalizers", None)
            else:
                spec["finalizers"] = old_finalizers
            out["spec"] = spec
        if res.kind == "DaemonSet":
            out = _bump_template_generation(out, old)
    if res.kind == "DaemonSet" and subresource == "status":
        out = _with_template_generation(out, _template_generation(old))
    if res.kind == "Pod" and res.group == "" and subresource == "status":
        out = _backfill_qos(out, old)
    return _carry_system_metadata(res, out, old, main=subresource is None)


def _backfill_qos(new: Obj, old: Obj) -> Obj:
    """The pod status strategy fills an empty ``qosClass`` from the stored one (old kubelets dropped it); a
    different one is left for validation to refuse (it is immutable)."""
    status = new.get("status")
    old_qos = (old.get("status") or {}).get("qosClass")
    if not old_qos or (isinstance(status, dict) and status.get("qosClass")):
        return new
    return {**new, "status": {**(status if isinstance(status, dict) else {}), "qosClass": old_qos}}


def _copy_field(meta: Obj, old_meta: Any, field: str) -> None:
    if field in old_meta:
        meta[field] = old_meta[field]
    else:
        meta.pop(field, None)


def _carry_system_metadata(res: Resource, new: Obj, old: Obj, *, main: bool) -> Obj:
    meta = dict(new.get("metadata") or {})
    old_meta = old.get("metadata") or {}
    for field in ("creationTimestamp", "deletionTimestamp"):
        _copy_field(meta, old_meta, field)
    if not meta.get("uid"):
        meta["uid"] = old_meta.get("uid")
    if "deletionGracePeriodSeconds" in old_meta and meta.get("deletionGracePeriodSeconds") is None:
        meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
    elif "deletionGracePeriodSeconds" not in old_meta:
        meta.pop("deletionGracePeriodSeconds", None)
    generation = old_meta.get("generation")
    if generation is not None:
        spec_changed = res.kind in GENERATION_KINDS and spec_of(new) != spec_of(old)
        # Deployments also count annotation changes: they are copied to the ReplicaSets.
        annotations_changed = main and res.kind == "Deployment" and meta.get("annotations") != old_meta.get(
            "annotations")
        # EndpointSlices count label changes too (their registry strategy compares labels beside the content).
        labels_changed = res.kind == "EndpointSlice" and meta.get("labels") != old_meta.get("labels")
        if spec_changed or annotations_changed or labels_changed:
            generation += 1
        meta["generation"] = generation
    else:
        meta.pop("generation", None)
    meta.pop("selfLink", None)
    return {**new, "metadata": meta}


def _template_generation(obj: Obj) -> int:
    """The DaemonSet's template generation, from its apps/v1 annotation (0 if absent or unparsable)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _with_template_generation(obj: Obj, generation: int) -> Obj:
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), TEMPLATE_GENERATION_ANNOTATION: str(generation)}
    return {**obj, "metadata": meta}


def _bump_template_generation(new: Obj, old: Obj) -> Obj:
    """A client cannot set the template generation; a changed template bumps it (daemonset PrepareForUpdate)."""
    generation = _template_generation(old)
    if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
        generation += 1
    return _with_template_generation(new, generation)


def pod_qos(pod: Obj) -> str:
    """v1.PodQOSClass as ``qos.GetPodQOS`` computes it from cpu/memory requests and limits."""
    containers = list((pod.get("spec") or {}).get("containers") or [])
    containers += list((pod.get("spec") or {}).get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests = {k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
        limits = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        if requests or limits:
            any_set = True
        if set(limits) != {"cpu", "memory"}:
            guaranteed = False
        for name, value in requests.items():
            if str(limits.get(name)) != str(value):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
