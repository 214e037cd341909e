"""The kubelet's volume manager, as far as the API shows it: CSINode publishing, waiting for a pod's volumes,
and ``node.status.volumesInUse``.

Guarantees:
- :meth:`KubeletVolumes.publish_csi_node` creates the node's CSINode (:func:`~.objects.csi_node`) once the
  Node is registered, or adds the driver to an existing one.
- :meth:`KubeletVolumes.check` says whether a pod's volumes are ready to mount on its node: every claim it uses
  (``persistentVolumeClaim`` volumes and generic ephemeral volumes) exists, is Bound to a PV that exists and
  points back at it; for a CSI PV whose driver requires attach (no CSIDriver, or ``attachRequired`` not false),
  the volume must be reported in use by the node (``node.status.volumesInUse``), listed in
  ``node.status.volumesAttached`` (the attach/detach controller's report) and its VolumeAttachment
  (``csi-<sha256(handle+driver+node)>``) attached. It records the attachable volumes' unique names
  (``kubernetes.io/csi/<driver>^<handle>``) for the pod, which stay in use until :meth:`forget`.
- :meth:`KubeletVolumes.in_use` is what the node reports in ``volumesInUse``: the sorted unique names of the
  attachable volumes of its pods that are not terminated (the caller says which pods still hold volumes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller_manager.api.csi import attach_required, attachment_name, pod_claim_names, unique_volume_name
from controller_manager.api.meta import meta
from controller_manager.api.resources import (
    CSIDRIVERS,
    CSINODES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    VOLUMEATTACHMENTS,
)
from controller_manager.sim.listwatch import status_code
from controller_manager.sim.storage.config import StorageConfig
from controller_manager.sim.storage.objects import csi_node

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["KubeletVolumes", "VolumeCheck"]

FIELD_MANAGER = "kubelet"


@dataclass(frozen=True, slots=True)
class VolumeCheck:
    ready: bool
    waiting_for: str = ""  # the first thing missing, for logs


class KubeletVolumes:
    def __init__(self, api: ApiServer, config: StorageConfig) -> None:
        self._api = api
        self.config = config
        self._names: dict[str, set[str]] = {}  # pod uid -> attachable unique volume names

    def _get(self, res: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self._api.get(res, namespace, name)
        except Exception as exc:
            if status_code(exc) == 404:
                return None
            raise
        return obj

    def publish_csi_node(self, node_name: str, node_uid: str) -> None:
        existing = self._get(CSINODES, None, node_name)
        wanted = csi_node(node_name, node_uid, self.config)
        if existing is None:
            try:
                self._api.create(CSINODES, wanted, field_manager=FIELD_MANAGER)
            except Exception as exc:
                if status_code(exc) != 409:
                    raise
            return
        drivers = list((existing.get("spec") or {}).get("drivers") or ())
        if any(d.get("name") == self.config.driver for d in drivers):
            return
        spec = {**(existing.get("spec") or {}), "drivers": [*drivers, *wanted["spec"]["drivers"]]}
        self._api.update(CSINODES, {**existing, "spec": spec}, field_manager=FIELD_MANAGER)

    def check(self, pod: Mapping[str, Any], node_name: str) -> VolumeCheck:
        m = meta(pod)
        uid, namespace = str(m.get("uid", "")), str(m.get("namespace", ""))
        names = self._names.setdefault(uid, set())
        node: dict[str, Any] | None = None
        missing: list[str] = []
        for volume, claim_name in pod_claim_names(pod):
            claim = self._get(PERSISTENTVOLUMECLAIMS, namespace, claim_name)
            if claim is None:
                missing.append(f'persistentvolumeclaim "{claim_name}" not found')
                continue
            pv_name = (claim.get("spec") or {}).get("volumeName")
            if (claim.get("status") or {}).get("phase") != "Bound" or not pv_name:
                missing.append(f"PVC {namespace}/{claim_name} is not bound")
                continue
            pv = self._get(PERSISTENTVOLUMES, None, str(pv_name))
            ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
            if pv is None or ref.get("uid") != meta(claim).get("uid"):
                missing.append(f"PV {pv_name} is not bound to PVC {namespace}/{claim_name}")
                continue
            csi = (pv.get("spec") or {}).get("csi")
            if not isinstance(csi, Mapping):
                continue  # nothing to attach
            driver, handle = str(csi.get("driver", "")), str(csi.get("volumeHandle", ""))
            if not attach_required(self._get(CSIDRIVERS, None, driver)):
                continue
            unique = unique_volume_name(driver, handle)
            names.add(unique)
            node = node or self._get(NODES, None, node_name) or {}
            status = node.get("status") or {}
            if unique not in (status.get("volumesInUse") or ()):
                missing.append(f"volume {volume} is not reported in use yet")
            elif unique not in {v.get("name") for v in status.get("volumesAttached") or ()}:
                missing.append(f"volume {volume} is not attached to node {node_name} yet")
            else:
                attachment = self._get(VOLUMEATTACHMENTS, None, attachment_name(handle, driver, node_name))
                if attachment is None or not (attachment.get("status") or {}).get("attached"):
                    missing.append(f"volume {volume} has no attached VolumeAttachment yet")
        return VolumeCheck(not missing, missing[0] if missing else "")

    def forget(self, uid: str) -> None:
        self._names.pop(uid, None)

    def in_use(self, pod_uids: Iterable[str]) -> list[str]:
        out: set[str] = set()
        for uid in pod_uids:
            out |= self._names.get(uid, set())
        return sorted(out)
