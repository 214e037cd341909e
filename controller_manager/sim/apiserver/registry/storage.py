"""storage.k8s.io kinds: StorageClass, VolumeAttachment, CSIDriver, CSINode, CSIStorageCapacity and
VolumeAttributesClass, each validated by its rules in :mod:`controller_manager.sim.apiserver.storage_kinds`
(VolumeAttributesClass in
:mod:`~controller_manager.sim.apiserver.storage_protection`; the core PersistentVolume kinds are in :mod:`.core`)."""

from __future__ import annotations

from controller_manager.sim.apiserver import storage_kinds, storage_protection
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError

GROUP = "storage.k8s.io"


class StorageClassStrategy(Strategy):
    group = GROUP
    kind = "StorageClass"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.storage_class_errors(obj, old)


class VolumeAttachmentStrategy(Strategy):
    group = GROUP
    kind = "VolumeAttachment"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.volume_attachment_errors(obj, old)


class CSIDriverStrategy(Strategy):
    group = GROUP
    kind = "CSIDriver"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.csi_driver_errors(obj, old)


class CSINodeStrategy(Strategy):
    group = GROUP
    kind = "CSINode"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.csi_node_errors(obj, old)


class VolumeAttributesClassStrategy(Strategy):
    group = GROUP
    kind = "VolumeAttributesClass"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_protection.volume_attributes_class_errors(obj, old)


class CSIStorageCapacityStrategy(Strategy):
    group = GROUP
    kind = "CSIStorageCapacity"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return storage_kinds.csi_storage_capacity_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (StorageClassStrategy(), VolumeAttachmentStrategy(), CSIDriverStrategy(),
                                    CSINodeStrategy(), VolumeAttributesClassStrategy(), CSIStorageCapacityStrategy())
