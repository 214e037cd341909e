"""What kube-sim's simulated CSI driver looks like and how fast its sidecars act.

Guarantees:
- :class:`StorageConfig` names the driver, the default StorageClass it backs (as kind and minikube ship one)
  and the delays after which the simulated external-provisioner and external-attacher act; every delay reads
  the cluster's injected clock.
- The defaults: driver ``csi.sim.controller-manager.io`` with ``attachRequired: true`` (so pods' volumes go
  through the attach/detach controller), class ``standard`` annotated
  ``storageclass.kubernetes.io/is-default-class: "true"``, ``Immediate`` binding, reclaim ``Delete``,
  expansion allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_DRIVER", "StorageConfig"]

DEFAULT_DRIVER = "csi.sim.controller-manager.io"


@dataclass(frozen=True, slots=True)
class StorageConfig:
    driver: str = DEFAULT_DRIVER
    attach_required: bool = True
    storage_class: str = "standard"  # "" for no default StorageClass
    volume_binding_mode: str = "Immediate"
    reclaim_policy: str = "Delete"
    allow_volume_expansion: bool = True
    provision_delay: float = 0.5  # seconds from a claim asking for a volume to its PV
    delete_delay: float = 0.5  # from a released Delete-policy PV to its deletion
    attach_delay: float = 0.5  # from a VolumeAttachment to status.attached
    detach_delay: float = 0.5  # from a VolumeAttachment's deletion to its finalizer's removal
    volume_poll: float = 0.2  # how often a kubelet re-checks the volumes of a pod that waits for them
