"""From a pod's volumes to the desired state of the world (``pkg/controller/volume/attachdetach/util``).

Guarantees:
- :func:`create_volume_spec` resolves a pod volume to a :class:`~.cache.VolumeSpec` through the informer caches,
  with upstream's errors: a claim (``persistentVolumeClaim``, or the ``<pod>-<volume>`` claim of a generic
  ephemeral volume, which must be owned by the pod) must exist, be Bound with ``spec.volumeName``, and its PV
  must exist with a ``claimRef`` to the claim's uid. Volumes that are not CSI persistent volumes (inline CSI
  volumes are ephemeral and never attached; the in-tree plugins are gone) resolve to None.
- :func:`attachable` is the CSI plugin's ``CanAttach``: the driver's CSIDriver does not say
  ``attachRequired: false``.
- :func:`process_pod_volumes` adds (or removes) each attachable volume of a pod scheduled to a managed node to
  (from) the desired state under the pod's uid; :func:`determine_volume_action` removes a terminated pod's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from controller_manager.api.csi import attach_required, is_pod_terminated
from controller_manager.api.meta import meta
from controller_manager.controllers.attachdetach.cache import DesiredStateOfWorld, StateError, VolumeSpec

__all__ = ["SpecError", "attachable", "create_volume_spec", "determine_volume_action", "process_pod_volumes"]

Obj = Mapping[str, Any]


class Getter(Protocol):
    def get(self, key: str) -> Any: ...


class SpecError(Exception):
    pass


def _pvc(namespace: str, name: str, pvcs: Getter) -> Obj:
    claim = pvcs.get(f"{namespace}/{name}")
    if claim is None:
        raise SpecError(f'failed to find PVC {namespace}/{name} in PVCInformer cache: '
                        f'persistentvolumeclaim "{name}" not found')
    return claim  # type: ignore[no-any-return]


def _volume_is_for_pod(pod: Obj, claim: Obj) -> None:
    uid = meta(pod).get("uid")
    owners = meta(claim).get("ownerReferences") or ()
    if not any(o.get("controller") and o.get("uid") == uid for o in owners):
        raise SpecError(f"PVC {meta(claim).get('namespace')}/{meta(claim).get('name')} was not created for pod "
                        f"{meta(pod).get('namespace')}/{meta(pod).get('name')} (pod is not owner)")


def create_volume_spec(volume: Obj, pod: Obj, pvcs: Getter, pvs: Getter) -> VolumeSpec | None:
    namespace = str(meta(pod).get("namespace", ""))
    source = volume.get("persistentVolumeClaim")
    claim_name, read_only = "", False
    if isinstance(source, Mapping):
        claim_name, read_only = str(source.get("claimName") or ""), bool(source.get("readOnly"))
    ephemeral = isinstance(volume.get("ephemeral"), Mapping)
    if ephemeral:
        claim_name = f"{meta(pod).get('name')}-{volume.get('name')}"
    if not claim_name:
        return None  # an inline volume: CSI ones are ephemeral and never attached
    try:
        claim = _pvc(namespace, claim_name, pvcs)
        if ephemeral:
            _volume_is_for_pod(pod, claim)
        pv_name = str((claim.get("spec") or {}).get("volumeName") or "")
        phase = (claim.get("status") or {}).get("phase") or ""
        if phase != "Bound" or not pv_name:
            raise SpecError(f'PVC {namespace}/{claim_name} has non-bound phase ("{phase}") or empty '
                            f'pvc.Spec.VolumeName ("{pv_name}")')
        pv = pvs.get(pv_name)
        if pv is None:
            raise SpecError(f'failed to find PV "{pv_name}" in PVInformer cache: '
                            f'persistentvolume "{pv_name}" not found')
        ref = (pv.get("spec") or {}).get("claimRef")
        if not isinstance(ref, Mapping):
            raise SpecError(f'found PV object "{pv_name}" but it has a nil pv.Spec.ClaimRef indicating it is not '
                            "yet bound to the claim")
        if ref.get("uid") != meta(claim).get("uid"):
            raise SpecError(f'found PV object "{pv_name}" but its pv.Spec.ClaimRef.UID ("{ref.get("uid")}") does not '
                            f'point to claim.UID ("{meta(claim).get("uid")}")')
    except SpecError as err:
        raise SpecError(f'error processing PVC {namespace}/{claim_name}: {err}') from None
    spec = pv.get("spec") or {}
    csi = spec.get("csi")
    if not isinstance(csi, Mapping):
        return None
    return VolumeSpec(name=pv_name, driver=str(csi.get("driver") or ""),
                      volume_handle=str(csi.get("volumeHandle") or ""),
                      access_modes=tuple(spec.get("accessModes") or ()), persistent=True,
                      read_only=read_only or bool(csi.get("readOnly")))


def spec_from_volume(pv: Obj) -> VolumeSpec | None:
    """A PV's spec as the controller sees it (recovering VolumeAttachments at start-up)."""
    spec = pv.get("spec") or {}
    csi = spec.get("csi")
    if not isinstance(csi, Mapping):
        return None
    return VolumeSpec(name=str(meta(pv).get("name", "")), driver=str(csi.get("driver") or ""),
                      volume_handle=str(csi.get("volumeHandle") or ""),
                      access_modes=tuple(spec.get("accessModes") or ()), persistent=True)


def attachable(spec: VolumeSpec, csi_drivers: Getter) -> bool:
    return attach_required(csi_drivers.get(spec.driver))


def determine_volume_action(pod: Obj | None, default: bool = True) -> bool:
    if pod is None or not (pod.get("spec") or {}).get("volumes"):
        return default
    if is_pod_terminated(pod):
        return False  # a terminated pod's volumes are unmounted: let them go
    return default


def process_pod_volumes(pod: Obj, add: bool, dsw: DesiredStateOfWorld, pvcs: Getter, pvs: Getter,
                        csi_drivers: Getter, log: Any) -> None:
    volumes = (pod.get("spec") or {}).get("volumes") or ()
    if not volumes:
        return
    m = meta(pod)
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    if not node:
        return
    if not dsw.node_exists(node):
        log.debug("Skipping processing of pod, it is scheduled to node which is not managed by the controller",
                  pod=f"{m.get('namespace')}/{m.get('name')}", node=node)
        return
    uid = str(m.get("uid", ""))
    for volume in volumes:
        try:
            spec = create_volume_spec(volume, pod, pvcs, pvs)
        except SpecError as err:
            log.debug("Error processing volume for pod", pod=f"{m.get('namespace')}/{m.get('name')}",
                      volumeName=volume.get("name"), err=str(err))
            continue
        if spec is None or not attachable(spec, csi_drivers):
            continue
        if add:
            try:
                dsw.add_pod(uid, pod, spec, node)
            except StateError as err:
                log.debug("Failed to add volume for pod to desiredStateOfWorld", volumeName=volume.get("name"),
                          err=str(err))
        else:
            dsw.delete_pod(uid, spec.unique_name, node)
