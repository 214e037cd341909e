"""batch/v1 kinds (``pkg/registry/batch/<kind>/strategy.go``): both track generation; a Job gets its
generated selector and template labels on create unless ``spec.manualSelector`` is true."""

from __future__ import annotations

from controller_manager.sim.apiserver import defaults, validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_workloads import validate_cronjob


class JobStrategy(Strategy):
    group = "batch"
    kind = "Job"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.job_errors(obj, old)

    def before_create(self, w: Write, obj: Obj) -> Obj:
        return defaults.job_selector_defaults(obj, obj["metadata"]["uid"])


class CronJobStrategy(Strategy):
    group = "batch"
    kind = "CronJob"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validate_cronjob(obj, old)


STRATEGIES: tuple[Strategy, ...] = (JobStrategy(), CronJobStrategy())
