"""CSI volume facts shared by the attach/detach controller and kube-sim's kubelets and sidecars.

Guarantees:
- :func:`unique_volume_name` is the name the kubelet and the attach/detach controller give a CSI volume
  (``kubernetes.io/csi/<driver>^<volumeHandle>``, the CSI plugin's ``GetVolumeName`` under its plugin name):
  the entries of ``node.status.volumesInUse`` and ``node.status.volumesAttached[].name``.
- :func:`attachment_name` is the VolumeAttachment name the CSI attacher uses:
  ``csi-`` + hex sha256 of volumeHandle + driver + node name.
- :func:`split_unique_volume_name` undoes :func:`unique_volume_name` (None for a non-CSI name).
- :func:`attach_required` reads a CSIDriver as the CSI plugin's ``skipAttach`` does: no CSIDriver object means
  attach is required; so does ``spec.attachRequired`` unset or true.
- :func:`pod_claim_names` lists the claims a pod's volumes use, in volume order: ``persistentVolumeClaim``
  volumes by claim name, generic ephemeral volumes by ``<pod name>-<volume name>``.
- :func:`is_pod_terminated` is the volume util's ``IsPodTerminated``: phase Failed or Succeeded, or deleted with
  no container still running (waiting or terminated counts as not running).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CONTROLLER_MANAGED_ATTACH_ANNOTATION", "CSI_PLUGIN_NAME", "attach_required", "attachment_name",
           "is_pod_terminated", "pod_claim_names", "split_unique_volume_name", "unique_volume_name"]

CSI_PLUGIN_NAME = "kubernetes.io/csi"
VOLUME_NAME_SEPARATOR = "^"
CONTROLLER_MANAGED_ATTACH_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"


def unique_volume_name(driver: str, volume_handle: str) -> str:
    return f"{CSI_PLUGIN_NAME}/{driver}{VOLUME_NAME_SEPARATOR}{volume_handle}"


def split_unique_volume_name(name: str) -> tuple[str, str] | None:
    """``(driver, volumeHandle)`` of a CSI unique volume name, else None."""
    prefix = CSI_PLUGIN_NAME + "/"
    if not name.startswith(prefix):
        return None
    parts = name[len(prefix):].split(VOLUME_NAME_SEPARATOR)
    if len(parts) != 2:
        return None
    return parts[0], parts[1]


def attachment_name(volume_handle: str, driver: str, node_name: str) -> str:
    digest = hashlib.sha256(f"{volume_handle}{driver}{node_name}".encode()).hexdigest()
    return f"csi-{digest}"


def attach_required(csi_driver: Mapping[str, Any] | None) -> bool:
    if csi_driver is None:
        return True
    spec = csi_driver.get("spec")
    value = spec.get("attachRequired") if isinstance(spec, Mapping) else None
    return value is None or bool(value)


def pod_claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(volume name, claim name)`` for every claim-backed volume of the pod."""
    spec = pod.get("spec")
    volumes: Iterable[Any] = (spec.get("volumes") or ()) if isinstance(spec, Mapping) else ()
    metadata = pod.get("metadata")
    pod_name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
    out = []
    for volume in volumes:
        if not isinstance(volume, Mapping):
            continue
        name = str(volume.get("name") or "")
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping) and claim.get("claimName"):
            out.append((name, str(claim["claimName"])))
        elif isinstance(volume.get("ephemeral"), Mapping):
            out.append((name, f"{pod_name}-{name}"))
    return out


def _not_running(statuses: Any) -> bool:
    for status in statuses or ():
        state = status.get("state") if isinstance(status, Mapping) else None
        state = state if isinstance(state, Mapping) else {}
        if state.get("terminated") is None and state.get("waiting") is None:
            return False
    return True


def is_pod_terminated(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    status = status if isinstance(status, Mapping) else {}
    if status.get("phase") in ("Failed", "Succeeded"):
        return True
    metadata = pod.get("metadata")
    deleted = isinstance(metadata, Mapping) and metadata.get("deletionTimestamp") is not None
    return deleted and all(_not_running(status.get(k)) for k in
                           ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"))
