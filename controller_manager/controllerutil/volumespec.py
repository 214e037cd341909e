"""A pod volume resolved to the CSI persistent volume behind it, as the volume controllers see it (the
attach/detach util's ``CreateVolumeSpec``; shared by the attach/detach and SELinux warning controllers).

Guarantees:
- :class:`VolumeSpec` is what a controller knows of a volume: its spec name (the PV's name), the CSI driver
  and handle, the PV's access modes; ``unique_name`` is ``kubernetes.io/csi/<driver>^<handle>``;
  ``multi_attach_allowed`` is ``IsMultiAttachAllowed`` (a PV without access modes, or with ReadWriteMany or
  ReadOnlyMany, may be attached to several nodes).
- :func:`create_volume_spec` resolves a pod volume to a :class:`VolumeSpec` through the informer caches,
  with upstream's errors (:class:`SpecError`): a claim (``persistentVolumeClaim``, or the ``<pod>-<volume>``
  claim of a generic ephemeral volume, which must be owned by the pod) must exist, be Bound with
  ``spec.volumeName``, and its PV must exist with a ``claimRef`` to the claim's uid. Volumes that are not CSI
  persistent volumes (inline volumes; PVs of in-tree plugins, whose CSI migration is not ported) resolve to
  None. :func:`spec_from_volume` is a PV's own spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller_manager.api.csi import unique_volume_name
from controller_manager.api.meta import meta

__all__ = ["Getter", "SpecError", "VolumeSpec", "create_volume_spec", "spec_from_volume"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    name: str
    driver: str
    volume_handle: str
    access_modes: tuple[str, ...] = ()
    persistent: bool = True  # from a PersistentVolume (a pod's inline volume otherwise)
    read_only: bool = False

    @property
    def unique_name(self) -> str:
        return unique_volume_name(self.driver, self.volume_handle)

    @property
    def multi_attach_allowed(self) -> bool:
        if not self.persistent or not self.access_modes:
            return True
        return any(mode in ("ReadWriteMany", "ReadOnlyMany") for mode in self.access_modes)


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
