"""batch/v1 kinds (``pkg/registry/batch/<kind>/strategy.go``): both track generation; a Job gets its
generated selector and template labels on create unless ``spec.manualSelector`` is true."""

from __future__ import annotations

from controller_manager.sim.apiserver import defaults
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write


class JobStrategy(Strategy):
    group = "batch"
    kind = "Job"
    tracks_generation = True

    def before_create(self, w: Write, obj: Obj) -> Obj:
        return defaults.job_selector_defaults(obj, obj["metadata"]["uid"])


class CronJobStrategy(Strategy):
    group = "batch"
    kind = "CronJob"
    tracks_generation = True


STRATEGIES: tuple[Strategy, ...] = (JobStrategy(), CronJobStrategy())
