"""The storage objects kube-sim's simulated CSI driver publishes, as the real components write them.

Guarantees:
- :func:`storage_class`: the default StorageClass (``storageclass.kubernetes.io/is-default-class: "true"``)
  whose provisioner is the driver.
- :func:`csi_driver`: the CSIDriver object a driver's deployment installs (``attachRequired`` as configured,
  ``Persistent`` lifecycle only).
- :func:`csi_node`: the CSINode a kubelet publishes for its node once the driver registered: owned by the
  Node, one driver entry with the node name as ``nodeID`` and the zone label as topology key, and the
  ``storage.alpha.kubernetes.io/migrated-plugins`` annotation kubelets set.
- :func:`provisioned_volume`: the PV the external-provisioner creates for a claim: ``pvc-<claim uid>``,
  pre-bound to the claim (``claimRef`` with uid and resourceVersion), the claim's size, access modes and
  volume mode, the class's reclaim policy and mount options, ``pv.kubernetes.io/provisioned-by``, the
  provisioner's finalizer on Delete-policy volumes, and (when the claim names a selected node) node affinity
  to that node's zone.
- :func:`sanitize_driver_name`: external-attacher's ``SanitizeDriverName`` (finalizer suffixes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.sim.storage.config import StorageConfig

__all__ = ["DEFAULT_CLASS_ANNOTATION", "MIGRATED_PLUGINS_ANNOTATION", "PROVISIONED_BY_ANNOTATION",
           "PROVISIONER_FINALIZER", "SELECTED_NODE_ANNOTATION", "STORAGE_PROVISIONER_ANNOTATIONS",
           "ZONE_LABEL", "attacher_finalizer", "csi_driver", "csi_node", "provisioned_volume",
           "sanitize_driver_name", "storage_class"]

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
# The in-tree plugins whose CSI migration is on in every kubelet that still knows them.
MIGRATED_PLUGINS = ("kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,"
                    "kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume")
PROVISIONED_BY_ANNOTATION = "pv.kubernetes.io/provisioned-by"
PROVISIONER_FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER_ANNOTATIONS = ("volume.kubernetes.io/storage-provisioner",
                                   "volume.beta.kubernetes.io/storage-provisioner")
ZONE_LABEL = "topology.kubernetes.io/zone"


def sanitize_driver_name(driver: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9-]", "-", driver)
    return name + "X" if name.endswith("-") else name


def attacher_finalizer(driver: str) -> str:
    return f"external-attacher/{sanitize_driver_name(driver)}"


def storage_class(config: StorageConfig) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": config.storage_class, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": config.driver,
        "reclaimPolicy": config.reclaim_policy,
        "volumeBindingMode": config.volume_binding_mode,
        "allowVolumeExpansion": config.allow_volume_expansion,
    }


def csi_driver(config: StorageConfig) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": config.driver},
        "spec": {"attachRequired": config.attach_required, "podInfoOnMount": False,
                 "volumeLifecycleModes": ["Persistent"]},
    }


def csi_node(node_name: str, node_uid: str, config: StorageConfig) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": node_name, "annotations": {MIGRATED_PLUGINS_ANNOTATION: MIGRATED_PLUGINS}}
    if node_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": metadata,
        "spec": {"drivers": [{"name": config.driver, "nodeID": node_name, "topologyKeys": [ZONE_LABEL]}]},
    }


def provisioned_volume(claim: Mapping[str, Any], klass: Mapping[str, Any], config: StorageConfig,
                       zone: str | None) -> dict[str, Any]:
    m = meta(claim)
    spec = claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    policy = klass.get("reclaimPolicy") or "Delete"
    pv_spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": policy,
        "storageClassName": meta(klass).get("name", ""),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": m.get("namespace"), "name": m.get("name"),
                     "uid": m.get("uid"), "apiVersion": "v1", "resourceVersion": m.get("resourceVersion")},
        "csi": {"driver": config.driver, "volumeHandle": f"vol-{m.get('uid')}", "fsType": "ext4",
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": f"kube-sim-{config.driver}"}},
    }
    if klass.get("mountOptions"):
        pv_spec["mountOptions"] = list(klass["mountOptions"])
    if zone:
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}}
    metadata: dict[str, Any] = {
        "name": f"pvc-{m.get('uid')}",
        "annotations": {PROVISIONED_BY_ANNOTATION: config.driver,
                        "volume.kubernetes.io/provisioner-deletion-secret-name": "",
                        "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""},
    }
    if policy == "Delete":
        metadata["finalizers"] = [PROVISIONER_FINALIZER]
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata, "spec": pv_spec}
