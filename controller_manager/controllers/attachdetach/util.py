"""From a pod's volumes to the desired state of the world (``pkg/controller/volume/attachdetach/util``).

Guarantees:
- :func:`create_volume_spec` (:mod:`controller_manager.controllerutil.volumespec`) resolves a pod volume through
  the informer caches; volumes that are not CSI persistent volumes (inline CSI volumes are ephemeral and never
  attached) resolve to None.
- :func:`attachable` is the CSI plugin's ``CanAttach``: the driver's CSIDriver does not say
  ``attachRequired: false``.
- :func:`process_pod_volumes` adds (or removes) each attachable volume of a pod scheduled to a managed node to
  (from) the desired state under the pod's uid; :func:`determine_volume_action` removes a terminated pod's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.csi import attach_required, is_pod_terminated
from controller_manager.api.meta import meta
from controller_manager.controllers.attachdetach.cache import DesiredStateOfWorld, StateError
from controller_manager.controllerutil.volumespec import (
    Getter,
    SpecError,
    VolumeSpec,
    create_volume_spec,
    spec_from_volume,
)

__all__ = ["SpecError", "attachable", "create_volume_spec", "determine_volume_action", "process_pod_volumes",
           "spec_from_volume"]

Obj = Mapping[str, Any]


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
