"""kube-sim's storage: a simulated CSI driver (CSIDriver, default StorageClass, external-provisioner and
external-attacher in :mod:`.sidecars`) and the kubelet's volume manager (:mod:`.kubelet`)."""

from controller_manager.sim.storage.config import DEFAULT_DRIVER, StorageConfig
from controller_manager.sim.storage.kubelet import KubeletVolumes
from controller_manager.sim.storage.sidecars import ATTACH_ERROR_ANNOTATION, StorageSim

__all__ = ["ATTACH_ERROR_ANNOTATION", "DEFAULT_DRIVER", "KubeletVolumes", "StorageConfig", "StorageSim"]
