"""The core group's (``""``, v1) kinds whose registries differ from the generic store
(``pkg/registry/core/<kind>/strategy.go`` and their REST storage).

- Pod: created ``Pending`` with its QoS class; tracks generation; a ``/status`` write keeps
  ownerReferences, fills an empty ``qosClass`` from the stored one and is checked by ValidatePodStatusUpdate;
  deletes gracefully (podStrategy.CheckGracefulDelete); LimitRanger, Priority and (when on) ServiceAccount
  admission mutate it on create; ``binding`` and ``eviction`` are answered here.
- Service: a clusterIP from the service CIDR and nodePorts are allocated on create (nodePorts again on an
  update); its ServiceCIDR bookkeeping follows each create and removal.
- Namespace: created ``Active`` with the ``kubernetes`` finalizer; ``spec.finalizers`` changes only
  through ``/finalize`` and keeps a deleted namespace until empty; deletion moves it to ``Terminating``;
  ``default``, ``kube-system`` and ``kube-public`` may not be deleted.
- Node: a create keeps the status its kubelet sends.
- PersistentVolume: created ``Pending`` with its phase transition time, renewed by each phase change;
  StorageObjectInUseProtection admission (the pv-protection finalizer) on create.
- PersistentVolumeClaim: DefaultStorageClass and StorageObjectInUseProtection admission on create.
- ReplicationController: tracks generation, serves ``/scale`` with a map selector.
- ServiceAccount: ``/token`` (TokenRequest) is answered here.
- Event, Endpoints, LimitRange, Service: PUT may create.
- PodTemplate: tracks generation (a changed template bumps it); its template is validated as a pod template.
- ComponentStatus: computed on each read from the control plane's health (:mod:`..component_status`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api import selectors
from controller_manager.api.quota import pod_qos
from controller_manager.api.resources import LIMITRANGES, NAMESPACES, PRIORITYCLASSES, STORAGECLASSES, Resource
from controller_manager.sim.apiserver import (
    component_status,
    errors,
    limitranger,
    node_ports,
    priority,
    service_cidrs,
    service_ips,
    storage_kinds,
    storage_protection,
    validation,
)
from controller_manager.sim.apiserver.auth import serviceaccount_admission
from controller_manager.sim.apiserver.objects import Obj, Stored
from controller_manager.sim.apiserver.registry.base import Strategy, Write, stored_objects
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pod_status import validate_pod_status_update
from controller_manager.sim.apiserver.validation_pods import NameFn, name_is_dns1035_label, name_is_dns_label

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth import User
    from controller_manager.sim.apiserver.deletion import DeleteOptions
    from controller_manager.sim.apiserver.server import ApiServer

IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


class PodStrategy(Strategy):
    kind = "Pod"
    tracks_generation = True
    status_reset_meta = ("ownerReferences",)
    defaults_spec_only = True  # (defaults._pod)
    returns_deleted_object = True
    graceful_delete = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.pod_errors(obj, old)

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        return validate_pod_status_update(obj, old)

    def keep_server_fields(self, w: Write, new: Obj, old: Obj) -> Obj:
        out = super().keep_server_fields(w, new, old)
        return _backfill_qos(out, old) if w.subresource == "status" else out

    def mutating_admission(self, api: ApiServer, obj: Obj, namespace: str | None) -> Obj:
        from controller_manager.sim.apiserver.server import random_suffix

        limitranger.mutate_pod(obj, stored_objects(api, LIMITRANGES, namespace))
        priority.admit_pod(obj, stored_objects(api, PRIORITYCLASSES, None))
        if api.options.service_account_admission and namespace and api.store(NAMESPACES).get(namespace) is not None:
            obj = serviceaccount_admission.admit(api, obj, namespace, random_suffix)
        return obj

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        out = dict(obj)
        meta = dict(out.get("metadata") or {})
        out["status"] = {"phase": "Pending", "qosClass": pod_qos(out)}  # GetPodQOS: a qosClass sent is kept
        meta["generation"] = 1
        out["metadata"] = meta
        return out

    def grace_period(self, obj: Obj, grace: int | None) -> int:
        spec = obj.get("spec") or {}
        period = grace if grace is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            period = 0
        return period

    def answer_create(self, api: ApiServer, res: Resource, subresource: str | None, namespace: str | None,
                      name: str, body: Any, user: User, dry_run: bool) -> Obj | None:
        from controller_manager.sim.apiserver import subresources

        if subresource == "binding" and namespace:
            return subresources.bind(api, namespace, name, body, dry_run=dry_run)
        if subresource == "eviction" and namespace:
            return subresources.evict(api, namespace, name, body, dry_run=dry_run)
        return None


def _backfill_qos(new: Obj, old: Obj) -> Obj:
    """The pod status strategy fills an empty ``qosClass`` from the stored one (old kubelets dropped it); a
    different one is left for validation to refuse (it is immutable)."""
    status = new.get("status")
    old_qos = (old.get("status") or {}).get("qosClass")
    if not old_qos or (isinstance(status, dict) and status.get("qosClass")):
        return new
    return {**new, "status": {**(status if isinstance(status, dict) else {}), "qosClass": old_qos}}


class ServiceStrategy(Strategy):
    kind = "Service"
    allow_create_on_update = True
    returns_deleted_object = True

    def name_rule(self, obj: Obj) -> NameFn:
        return name_is_dns1035_label

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.service_errors(obj, old)

    def before_create(self, w: Write, obj: Obj) -> Obj:
        store = w.api.store(w.res)
        in_use = ((s.obj.get("spec") or {}).get("clusterIP") for s in store.iter_from(None))
        held = service_cidrs.allocated(w.api)  # (an IPAddress a user made holds its address too)
        obj = service_ips.assign(obj, [*(ip for ip in in_use if isinstance(ip, str)), *held])
        return node_ports.assign(obj, None, node_ports.in_use(s.obj for s in store.iter_from(None)))

    def before_update(self, w: Write, obj: Obj, old: Obj) -> Obj:
        if w.subresource is not None:
            return obj
        others = (s.obj for s in w.api.store(w.res).iter_from(None) if s.key != w.key)
        return node_ports.assign(obj, old, node_ports.in_use(others))

    def after_create(self, api: ApiServer, obj: Obj) -> None:
        service_cidrs.after_service_created(api, obj)

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        service_cidrs.after_service_removed(api, obj)


class NamespaceStrategy(Strategy):
    kind = "Namespace"
    returns_deleted_object = True
    names_own_namespace = True

    def name_rule(self, obj: Obj) -> NameFn:
        return name_is_dns_label

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.namespace_errors(obj, old)

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        out = dict(obj)
        meta = dict(out.get("metadata") or {})
        spec = dict(out.get("spec") or {})
        finalizers = list(spec.get("finalizers") or [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        spec["finalizers"] = finalizers
        out["spec"] = spec
        out["status"] = {"phase": "Active"}
        out["metadata"] = meta
        return out

    def keep_server_fields(self, w: Write, new: Obj, old: Obj) -> Obj:
        if w.subresource == "finalize":  # only spec.finalizers changes
            out = dict(old)
            spec = dict(old.get("spec") or {})
            spec["finalizers"] = list((new.get("spec") or {}).get("finalizers") or [])
            out["spec"] = spec
            return out
        out = super().keep_server_fields(w, new, old)
        if w.subresource is None:  # the main resource cannot change spec.finalizers
            spec = dict(out.get("spec") or {})
            old_finalizers = (old.get("spec") or {}).get("finalizers")
            if old_finalizers is None:
                spec.pop("finalizers", None)
            else:
                spec["finalizers"] = old_finalizers
            out["spec"] = spec
        return out

    def holds_removal(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))

    def check_delete(self, res: Resource, name: str) -> None:
        if name in IMMORTAL_NAMESPACES:
            raise errors.forbidden(res.group, res.plural, name, "this namespace may not be deleted")

    def delete(self, api: ApiServer, res: Resource, existing: Stored, options: DeleteOptions) -> Stored | Obj:
        from controller_manager.sim.apiserver import deletion

        return deletion.delete_namespace(api, res, existing, options)


class NodeStrategy(Strategy):
    kind = "Node"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.node_errors(obj, old)

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        return {**obj, "metadata": dict(obj.get("metadata") or {})}  # the kubelet's status stays


class PersistentVolumeStrategy(Strategy):
    kind = "PersistentVolume"
    returns_deleted_object = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.persistent_volume_errors(obj, old)

    def mutating_admission(self, api: ApiServer, obj: Obj, namespace: str | None) -> Obj:
        storage_protection.admit(self.kind, obj)
        return obj

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        return storage_kinds.prepare_pv(super().prepare_for_create(w, obj), None, w.now())

    def prepare_for_update(self, w: Write, new: Obj, old: Obj) -> Obj:
        new = super().prepare_for_update(w, new, old)
        return storage_kinds.prepare_pv(new, old, w.now()) if w.subresource == "status" else new


class PersistentVolumeClaimStrategy(Strategy):
    kind = "PersistentVolumeClaim"
    returns_deleted_object = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.persistent_volume_claim_errors(obj, old)

    def mutating_admission(self, api: ApiServer, obj: Obj, namespace: str | None) -> Obj:
        storage_kinds.admit_claim(obj, stored_objects(api, STORAGECLASSES, None))
        storage_protection.admit(self.kind, obj)
        return obj

    def before_update(self, w: Write, obj: Obj, old: Obj) -> Obj:
        if w.subresource is None:
            classes = {str((c.get("metadata") or {}).get("name")): c
                       for c in stored_objects(w.api, STORAGECLASSES, None)}
            why = storage_protection.resize_refusal(obj, old, classes)
            if why is not None:
                name = str((obj.get("metadata") or {}).get("name") or "")
                raise errors.forbidden("", "persistentvolumeclaims", name, why)
        return obj


class ReplicationControllerStrategy(Strategy):
    kind = "ReplicationController"
    tracks_generation = True
    has_scale = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.replication_controller_errors(obj, old)

    def scale_selector(self, selector: Any) -> str:
        return str(selectors.from_set(selector or {}))


class ServiceAccountStrategy(Strategy):
    kind = "ServiceAccount"

    def answer_create(self, api: ApiServer, res: Resource, subresource: str | None, namespace: str | None,
                      name: str, body: Any, user: User, dry_run: bool) -> Obj | None:
        if subresource == "token" and namespace and api.auth is not None:
            return api.auth.token_request(namespace, name, body)
        return None


class EventStrategy(Strategy):
    kind = "Event"
    allow_create_on_update = True

    def store_key(self, res: Resource) -> tuple[str, str]:
        return ("", "events")  # shared with events.k8s.io, as upstream stores both in core/v1 form

    # The registry's TTLFunc: every create and update gets a lease of --event-ttl (:mod:`..ttl`).
    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        api.event_leases.attach(api.key(res, obj["metadata"].get("namespace"), obj["metadata"]["name"]))

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        api.event_leases.detach(api.key(res, obj["metadata"].get("namespace"), obj["metadata"]["name"]))


class EndpointsStrategy(Strategy):
    kind = "Endpoints"
    allow_create_on_update = True


class LimitRangeStrategy(Strategy):
    kind = "LimitRange"
    allow_create_on_update = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return limitranger.validate(obj, old)


class ResourceQuotaStrategy(Strategy):
    kind = "ResourceQuota"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.resource_quota_errors(obj, old)


class PodTemplateStrategy(Strategy):
    kind = "PodTemplate"
    tracks_generation = True  # any change of the template bumps it (podtemplate PrepareForUpdate)

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.pod_template_errors(obj, old)


class ComponentStatusStrategy(Strategy):
    """Computed on each read from the control plane's probes (:mod:`component_status`); get and list only."""

    kind = "ComponentStatus"
    computed = True
    deprecation_warning = component_status.DEPRECATION_WARNING

    async def read_async(self, api: ApiServer, res: Resource, verb: str, namespace: str | None, name: str,
                         query: Any) -> Obj:
        if verb == "get":
            return await component_status.get(api.component_probes, name)
        return await component_status.list_statuses(api.component_probes, query.get("labelSelector"),
                                                     query.get("fieldSelector"))


EVENT = EventStrategy()
STRATEGIES: tuple[Strategy, ...] = (
    PodStrategy(), ServiceStrategy(), NamespaceStrategy(), NodeStrategy(), PersistentVolumeStrategy(),
    PersistentVolumeClaimStrategy(), ReplicationControllerStrategy(), ServiceAccountStrategy(), EVENT,
    EndpointsStrategy(), LimitRangeStrategy(), ResourceQuotaStrategy(), PodTemplateStrategy(),
    ComponentStatusStrategy())
