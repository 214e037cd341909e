"""kube-sim's scheduler VolumeBinding plugin (kube-scheduler's ``pkg/scheduler/framework/plugins/volumebinding``
over ``pkg/controller/volume/persistentvolume``'s scheduler binder), as far as kube-sim's scheduler needs it.

Guarantees, as kube-scheduler's:
- PreFilter (:meth:`VolumeBinding.prefilter`): a pod whose claims (``persistentVolumeClaim`` volumes and generic
  ephemeral volumes, ``<pod>-<volume>``) are missing, Lost or being deleted, or which has an unbound claim of an
  Immediate class (or one pre-bound by ``spec.volumeName`` but not bound yet), is unschedulable and unresolvable
  with upstream's message (``pod has unbound immediate PersistentVolumeClaims``, ``persistentvolumeclaim "x" not
  found``, ...). Pods without claims are not looked at.
- Filter (:meth:`PodVolumes.filter`): a node is rejected with ``node(s) had volume node affinity conflict`` when a
  bound volume's node affinity excludes it, and with ``node(s) didn't find available persistent volumes to bind``
  when a WaitForFirstConsumer claim neither fits an Available volume there (node affinity, access modes, size,
  class, selector) nor can be provisioned there (class provisioner set and not ``kubernetes.io/no-provisioner``,
  node labels matching ``allowedTopologies``, no other node already selected for it).
- Reserve + PreBind (:meth:`PodVolumes.bind`): on the chosen node, the matched volumes get the claim's claimRef
  (``pv.kubernetes.io/bound-by-controller: "yes"``), and claims to provision get
  ``volume.kubernetes.io/selected-node: <node>``; then the pod waits, polled every second, until every claim is
  fully bound (``pv.kubernetes.io/bind-completed``, its volume's claimRef pointing back) before it is bound to the
  node. A provisioner that gives up (the annotation removed or moved) or the bind timeout (600 s) fails the
  attempt with upstream's error text, and the pod is scheduled again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import meta
from controller_manager.api.quantity import parse_quantity
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, STORAGECLASSES
from controller_manager.api.selectors import InvalidSelector, from_label_selector
from controller_manager.clock import Clock
from controller_manager.sim.predicates import match_node_selector_terms

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = Mapping[str, Any]

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"

DEFAULT_BIND_TIMEOUT = 600.0  # VolumeBindingArgs.bindTimeoutSeconds
POLL_INTERVAL = 1.0


class VolumeBindingError(Exception):
    """PreBind failed; ``str()`` is what kube-scheduler reports."""


def _spec(obj: Obj) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def _annotations(obj: Obj) -> Mapping[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, Mapping) else {}


def _name(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def pod_claim_names(pod: Obj) -> list[tuple[str, bool]]:
    """The names of the claims a pod uses, each with whether it is a generic ephemeral volume's."""
    out = []
    for volume in _spec(pod).get("volumes") or ():
        if not isinstance(volume, Mapping):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            out.append((str(source.get("claimName") or ""), False))
        elif volume.get("ephemeral") is not None:
            out.append((f"{_name(pod)}-{volume.get('name') or ''}", True))
    return out


def claim_class(claim: Obj) -> str:
    ann = _annotations(claim)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(_spec(claim).get("storageClassName") or "")


def volume_class(volume: Obj) -> str:
    ann = _annotations(volume)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(_spec(volume).get("storageClassName") or "")


def _storage(value: Any) -> Decimal:
    if not isinstance(value, Mapping) or value.get("storage") is None:
        return Decimal(0)
    try:
        return parse_quantity(value["storage"])
    except ValueError:
        return Decimal(0)


def volume_fits_node(volume: Obj, node_name: str, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: the volume's required node affinity admits the node."""
    affinity = _spec(volume).get("nodeAffinity")
    required = affinity.get("required") if isinstance(affinity, Mapping) else None
    if not isinstance(required, Mapping):
        return True
    # The scheduler's own node selector matching (NodeAffinity's MatchNodeSelectorTerms), as upstream shares it.
    return match_node_selector_terms(required.get("nodeSelectorTerms"), node_name, labels)


def topology_fits_node(storage_class: Obj, labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no allowedTopologies, or one term whose every expression the node meets."""
    terms = storage_class.get("allowedTopologies") or ()
    if not terms:
        return True
    for term in terms:
        expressions = term.get("matchLabelExpressions") or () if isinstance(term, Mapping) else ()
        if all(labels.get(str(e.get("key"))) in [str(v) for v in e.get("values") or ()] for e in expressions):
            return True
    return False


def _is_bound_to(volume: Obj, claim: Obj) -> bool:
    ref = _spec(volume).get("claimRef")
    if not isinstance(ref, Mapping):
        return False
    if ref.get("name") != _name(claim) or ref.get("namespace") != meta(claim).get("namespace"):
        return False
    uid = ref.get("uid") or ""
    return not uid or uid == meta(claim).get("uid")


def _find_volume(claim: Obj, volumes: Sequence[Obj], node_name: str, labels: Mapping[str, str],
                 chosen: set[str]) -> Obj | None:
    """``FindMatchingVolume`` on the scheduler path (with a node)."""
    requested = _storage((_spec(claim).get("resources") or {}).get("requests"))
    wanted_modes = set(_spec(claim).get("accessModes") or ())
    claim_mode = _spec(claim).get("volumeMode") or "Filesystem"
    selector = None
    if _spec(claim).get("selector") is not None:
        try:
            selector = from_label_selector(_spec(claim)["selector"])
        except InvalidSelector:
            return None
    smallest: Obj | None = None
    for volume in volumes:
        if _name(volume) in chosen:
            continue
        if _spec(volume).get("claimRef") is not None and not _is_bound_to(volume, claim):
            continue
        size = _storage(_spec(volume).get("capacity"))
        if size < requested or (_spec(volume).get("volumeMode") or "Filesystem") != claim_mode:
            continue
        if meta(volume).get("deletionTimestamp") is not None:
            continue
        fits = volume_fits_node(volume, node_name, labels)
        if _is_bound_to(volume, claim):
            return volume if fits else None
        if (volume.get("status") or {}).get("phase") != "Available":
            continue
        if selector is not None and not selector.matches(meta(volume).get("labels") or {}):
            continue
        if volume_class(volume) != claim_class(claim) or not fits:
            continue
        if (_spec(claim).get("volumeAttributesClassName") or "") != (
                _spec(volume).get("volumeAttributesClassName") or ""):
            continue
        if not wanted_modes <= set(_spec(volume).get("accessModes") or ()):
            continue
        if smallest is None or _storage(_spec(smallest).get("capacity")) > size:
            smallest = volume
    return smallest


@dataclass
class NodeDecision:
    """What binding on one node takes: volumes to pre-bind to claims, claims to provision there."""

    bindings: list[tuple[Obj, Obj]] = field(default_factory=list)  # (volume, claim)
    provisions: list[Obj] = field(default_factory=list)


@dataclass
class PodVolumes:
    """A pod's claims as PreFilter sorted them."""

    bound: Sequence[Obj]
    delayed: Sequence[Obj]
    binding: VolumeBinding

    def decide(self, node_name: str, labels: Mapping[str, str]) -> tuple[list[str], NodeDecision]:
        """Filter: the reasons ``node_name`` cannot take the pod's volumes (empty if it can), and the plan."""
        reasons: list[str] = []
        decision = NodeDecision()
        for claim in self.bound:
            bound_volume = self.binding.volume(str(_spec(claim).get("volumeName") or ""))
            if bound_volume is None or not volume_fits_node(bound_volume, node_name, labels):
                reasons.append(REASON_NODE_CONFLICT)
                break
        chosen: set[str] = set()
        satisfied = True
        for claim in self.delayed:
            selected = _annotations(claim).get(ANN_SELECTED_NODE)
            if selected is not None:
                if selected != node_name:
                    satisfied = False
                    break
                decision.provisions.append(claim)
                continue
            candidates = [v for v in self.binding.volumes() if volume_class(v) == claim_class(claim)]
            volume = _find_volume(claim, candidates, node_name, labels, chosen)
            if volume is not None:
                chosen.add(_name(volume))
                decision.bindings.append((volume, claim))
                continue
            storage_class = self.binding.storage_class(claim_class(claim))
            provisioner = str((storage_class or {}).get("provisioner") or "")
            if (storage_class is None or not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER
                    or not topology_fits_node(storage_class, labels)):
                satisfied = False
                break
            decision.provisions.append(claim)
        if not satisfied:
            reasons.append(REASON_BIND_CONFLICT)
        return reasons, decision

    @property
    def needs_binding(self) -> bool:
        return bool(self.delayed)


class VolumeBinding:
    """The plugin: reads claims, volumes and classes from the in-process API server, writes what PreBind writes."""

    def __init__(self, api: ApiServer, clock: Clock, *, field_manager: str,
                 bind_timeout: float = DEFAULT_BIND_TIMEOUT, poll_interval: float = POLL_INTERVAL) -> None:
        self._api = api
        self._clock = clock
        self._field_manager = field_manager
        self.bind_timeout = bind_timeout
        self.poll_interval = poll_interval

    # --- reads --------------------------------------------------------------------------------------------

    def _get(self, res: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return self._api.get(res, namespace, name)
        except Exception as exc:
            if getattr(exc, "code", None) == 404:
                return None
            raise

    def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(PERSISTENTVOLUMECLAIMS, namespace, name)

    def volume(self, name: str) -> dict[str, Any] | None:
        return self._get(PERSISTENTVOLUMES, None, name) if name else None

    def volumes(self) -> list[dict[str, Any]]:
        return self._api.list(PERSISTENTVOLUMES)[0]

    def storage_class(self, name: str) -> dict[str, Any] | None:
        return self._get(STORAGECLASSES, None, name) if name else None

    # --- PreFilter ------------------------------------------------------------------------------------------

    def prefilter(self, pod: Obj) -> PodVolumes | str | None:
        """None: the pod has no claims (the plugin is skipped); a message: the pod is unschedulable and
        unresolvable everywhere; else the pod's claims, sorted."""
        names = pod_claim_names(pod)
        if not names:
            return None
        namespace = str(meta(pod).get("namespace") or "")
        claims = []
        for name, ephemeral in names:
            claim = self.claim(namespace, name)
            if claim is None:
                if ephemeral:
                    return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                return f'persistentvolumeclaim "{name}" not found'
            if (claim.get("status") or {}).get("phase") == "Lost":
                return (f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                        f'"{_spec(claim).get("volumeName") or ""}"')
            if meta(claim).get("deletionTimestamp") is not None:
                return f'persistentvolumeclaim "{name}" is being deleted'
            if ephemeral and not _owned_by(claim, pod):
                return f'PVC {namespace}/{name} was not created for pod {namespace}/{_name(pod)} (pod is not owner)'
            claims.append(claim)
        bound, delayed, immediate = [], [], []
        for claim in claims:
            volume_name = str(_spec(claim).get("volumeName") or "")
            if volume_name and ANN_BIND_COMPLETED in _annotations(claim):
                bound.append(claim)
                continue
            storage_class = self.storage_class(claim_class(claim))
            delay = storage_class is not None and storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
            if delay and not volume_name:
                delayed.append(claim)
            else:
                immediate.append(claim)
        if immediate:
            return REASON_UNBOUND_IMMEDIATE
        return PodVolumes(bound, delayed, self)

    # --- Reserve + PreBind ----------------------------------------------------------------------------------

    async def bind(self, pod: Obj, node_name: str, decision: NodeDecision,
                   still_wanted: Callable[[], bool] = lambda: True) -> None:
        """Write the pre-bindings and the selected node, then wait until every claim is bound.

        Raises :class:`VolumeBindingError` with kube-scheduler's message when that fails."""
        try:
            for volume, claim in decision.bindings:
                clone = copy.deepcopy(dict(volume))
                ref = {"kind": "PersistentVolumeClaim", "namespace": meta(claim).get("namespace"),
                       "name": _name(claim), "uid": meta(claim).get("uid"), "apiVersion": "v1",
                       "resourceVersion": meta(claim).get("resourceVersion")}
                clone.setdefault("spec", {})["claimRef"] = {k: v for k, v in ref.items() if v}
                clone.setdefault("metadata", {}).setdefault("annotations", {}).setdefault(
                    ANN_BOUND_BY_CONTROLLER, "yes")
                self._api.update(PERSISTENTVOLUMES, clone, field_manager=self._field_manager)
            for claim in decision.provisions:
                clone = copy.deepcopy(dict(claim))
                clone.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node_name
                self._api.update(PERSISTENTVOLUMECLAIMS, clone, field_manager=self._field_manager)
        except Exception as exc:
            raise VolumeBindingError(f"binding volumes: {exc}") from exc
        deadline = self._clock.monotonic() + self.bind_timeout
        while True:
            if self._bindings_done(pod, node_name, decision):
                return
            if not still_wanted():
                raise VolumeBindingError("binding volumes: pod is gone")
            if self._clock.monotonic() >= deadline:
                raise VolumeBindingError("binding volumes: context deadline exceeded")
            await self._clock.sleep(self.poll_interval)

    def _bindings_done(self, pod: Obj, node_name: str, decision: NodeDecision) -> bool:
        """``checkBindings``: True when all bound, False to keep waiting; raises when binding cannot finish."""
        namespace = str(meta(pod).get("namespace") or "")
        for volume, claim in decision.bindings:
            current = self.volume(_name(volume))
            if current is None:
                raise VolumeBindingError(f'binding volumes: pv "{_name(volume)}" not found')
            if not _is_bound_to(current, claim):
                raise VolumeBindingError(f'binding volumes: pv "{_name(volume)}" not bound to pvc '
                                         f'"{namespace}/{_name(claim)}"')
        for _, claim in decision.bindings:
            current = self.claim(namespace, _name(claim))
            if current is None:
                raise VolumeBindingError(f'binding volumes: pvc "{namespace}/{_name(claim)}" not found')
            if ANN_BIND_COMPLETED not in _annotations(current):
                return False
        for claim in decision.provisions:
            current = self.claim(namespace, _name(claim))
            if current is None:
                raise VolumeBindingError(f'binding volumes: pvc "{namespace}/{_name(claim)}" not found')
            if not _spec(current).get("volumeName"):
                if _annotations(current).get(ANN_SELECTED_NODE) != node_name:
                    raise VolumeBindingError(f'binding volumes: provisioning failed for PVC "{_name(claim)}"')
                return False
            if ANN_BIND_COMPLETED not in _annotations(current):
                return False
        return True


def _owned_by(claim: Obj, pod: Obj) -> bool:
    uid = meta(pod).get("uid")
    return any(isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid") == uid
               for ref in meta(claim).get("ownerReferences") or ())


__all__ = ["NodeDecision", "PodVolumes", "VolumeBinding", "VolumeBindingError", "pod_claim_names"]
