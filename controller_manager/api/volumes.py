"""Volume helpers the storage controllers share: protection finalizers, generic ephemeral volumes, the pods
that use a claim (``pkg/volume/util``, ``pkg/controller/util/protectionutil``, ``pkg/controller/volume/common``
and ``k8s.io/component-helpers/storage/ephemeral``).

Guarantees:
- Objects are the API's JSON (plain dicts) and are never mutated; a missing field reads as Go's zero value.
- :func:`ephemeral_claim_name` is ``<pod name>-<volume name>``, the claim a generic ephemeral volume gets.
- :func:`volume_is_for_pod` returns upstream's error text when the claim is not controlled by the pod (or is in
  another namespace), None when it is.
- :func:`pod_pvc_index` is upstream's ``PodPVCIndexFunc``: ``namespace/claim`` for every claim a pod's volumes
  name, ephemeral ones included.
- :func:`is_pod_terminated` is ``volumeutil.IsPodTerminated``: Succeeded or Failed, or being deleted with no
  container (init, regular, ephemeral) still running.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from controller_manager.api.meta import meta

__all__ = [
    "POD_PVC_INDEX",
    "PVC_PROTECTION_FINALIZER",
    "PV_PROTECTION_FINALIZER",
    "VAC_PROTECTION_FINALIZER",
    "claim_names",
    "ephemeral_claim_name",
    "is_deletion_candidate",
    "is_pod_terminated",
    "need_to_add_finalizer",
    "pod_pvc_index",
    "pod_volumes",
    "volume_is_for_pod",
]

Obj = Mapping[str, Any]

PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection"
VAC_PROTECTION_FINALIZER = "kubernetes.io/vac-protection"
POD_PVC_INDEX = "pod-pvc-index"


def _finalizers(obj: Obj) -> list[Any]:
    value = meta(obj).get("finalizers")
    return value if isinstance(value, list) else []


def is_deletion_candidate(obj: Obj, finalizer: str) -> bool:
    """Being deleted and still holding ``finalizer`` (``protectionutil.IsDeletionCandidate``)."""
    return meta(obj).get("deletionTimestamp") is not None and finalizer in _finalizers(obj)


def need_to_add_finalizer(obj: Obj, finalizer: str) -> bool:
    """Not being deleted and without ``finalizer`` (``protectionutil.NeedToAddFinalizer``)."""
    return meta(obj).get("deletionTimestamp") is None and finalizer not in _finalizers(obj)


def pod_volumes(pod: Obj) -> Iterator[Mapping[str, Any]]:
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    for volume in volumes if isinstance(volumes, list) else ():
        if isinstance(volume, Mapping):
            yield volume


def ephemeral_claim_name(pod: Obj, volume: Obj) -> str:
    return f"{meta(pod).get('name', '')}-{volume.get('name', '')}"


def volume_is_for_pod(pod: Obj, pvc: Obj) -> str | None:
    """None when ``pvc`` was created for ``pod`` (same namespace, the pod its controller); else why not."""
    pm, cm = meta(pod), meta(pvc)
    owned = any(isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid") == pm.get("uid")
                for ref in cm.get("ownerReferences") or ())
    if cm.get("namespace") != pm.get("namespace") or not owned:
        return (f"PVC {cm.get('namespace', '')}/{cm.get('name', '')} was not created for pod "
                f"{pm.get('namespace', '')}/{pm.get('name', '')} (pod is not owner)")
    return None


def claim_names(pod: Obj) -> list[str]:
    """The claims the pod's volumes name: ``persistentVolumeClaim.claimName`` or the ephemeral claim's name."""
    names = []
    for volume in pod_volumes(pod):
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            name = str(source.get("claimName") or "")
            if name:
                names.append(name)
        elif volume.get("ephemeral") is not None:
            names.append(ephemeral_claim_name(pod, volume))
    return names


def pod_pvc_index(pod: Obj) -> list[str]:
    namespace = meta(pod).get("namespace", "")
    return [f"{namespace}/{name}" for name in claim_names(pod)]


def _none_running(statuses: Any) -> bool:
    for status in statuses if isinstance(statuses, list) else ():
        state = status.get("state") if isinstance(status, Mapping) else None
        state = state if isinstance(state, Mapping) else {}
        if state.get("terminated") is None and state.get("waiting") is None:
            return False
    return True


def is_pod_terminated(pod: Obj) -> bool:
    status = pod.get("status")
    status = status if isinstance(status, Mapping) else {}
    if status.get("phase") in ("Failed", "Succeeded"):
        return True
    return (meta(pod).get("deletionTimestamp") is not None
            and all(_none_running(status.get(key))
                    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")))
