"""resource.k8s.io kinds (dynamic resource allocation), each validated by
:mod:`controller_manager.sim.apiserver.resource_kinds` (``pkg/registry/resource/<kind>/strategy.go``):

- DeviceClass and ResourceSlice track generation (a spec change bumps it).
- ResourceClaim: created with an empty status; its spec is immutable; ``/status`` writes are checked by
  ValidateResourceClaimStatusUpdate.
- ResourceClaimTemplate: its spec is immutable.
"""

from __future__ import annotations

from controller_manager.sim.apiserver import resource_kinds
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError

GROUP = "resource.k8s.io"


class DeviceClassStrategy(Strategy):
    group = GROUP
    kind = "DeviceClass"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return resource_kinds.device_class_errors(obj, old)


class ResourceClaimStrategy(Strategy):
    group = GROUP
    kind = "ResourceClaim"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return resource_kinds.resource_claim_errors(obj, old)

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        return resource_kinds.resource_claim_status_errors(obj, old)


class ResourceClaimTemplateStrategy(Strategy):
    group = GROUP
    kind = "ResourceClaimTemplate"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return resource_kinds.resource_claim_template_errors(obj, old)


class ResourceSliceStrategy(Strategy):
    group = GROUP
    kind = "ResourceSlice"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return resource_kinds.resource_slice_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (DeviceClassStrategy(), ResourceClaimStrategy(), ResourceClaimTemplateStrategy(),
                                    ResourceSliceStrategy())
