"""scheduling.k8s.io kinds: PriorityClasses are validated (value range, the reserved ``system-`` prefix) and
pass the Priority admission plugin's checks (one global default; see
:mod:`controller_manager.sim.apiserver.priority`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import PRIORITYCLASSES
from controller_manager.sim.apiserver import priority
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, stored_objects
from controller_manager.sim.apiserver.validation_errors import FieldError

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer


class PriorityClassStrategy(Strategy):
    group = PRIORITYCLASSES.group
    kind = PRIORITYCLASSES.kind

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return priority.validate(obj, old)

    def validating_admission(self, api: ApiServer, obj: Obj) -> None:
        priority.admit_class(obj, stored_objects(api, PRIORITYCLASSES, None))


STRATEGIES: tuple[Strategy, ...] = (PriorityClassStrategy(),)
