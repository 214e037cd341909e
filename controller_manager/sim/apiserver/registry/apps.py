"""apps/v1 kinds (``pkg/registry/apps/<kind>/strategy.go``): every workload tracks generation and its status
strategy resets labels; Deployments, ReplicaSets and StatefulSets serve ``/scale``.

- Deployment: annotation changes of the main resource bump generation too (they are copied to ReplicaSets).
- DaemonSet: apps/v1 carries the internal ``spec.templateGeneration`` in the
  ``deprecated.daemonset.template.generation`` annotation: 1 on create, bumped by a changed template, never
  set by a client, kept by ``/status`` writes.
"""

from __future__ import annotations

from controller_manager.sim.apiserver import validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_workloads import (
    validate_daemonset,
    validate_deployment,
    validate_replicaset,
    validate_statefulset,
)

# appsv1.DeprecatedTemplateGeneration: where apps/v1 shows a DaemonSet's internal spec.templateGeneration.
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"


class _Workload(Strategy):
    group = "apps"
    tracks_generation = True
    status_reset_meta = ("labels",)


class DeploymentStrategy(_Workload):
    kind = "Deployment"
    has_scale = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.apps_errors(validate_deployment, self.kind, obj, old)

    def generation_changed(self, new: Obj, old: Obj, *, main: bool) -> bool:
        annotations = (new.get("metadata") or {}).get("annotations")
        return super().generation_changed(new, old, main=main) or (
            main and annotations != (old.get("metadata") or {}).get("annotations"))


class ReplicaSetStrategy(_Workload):
    kind = "ReplicaSet"
    has_scale = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.apps_errors(validate_replicaset, self.kind, obj, old)


class StatefulSetStrategy(_Workload):
    kind = "StatefulSet"
    has_scale = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.apps_errors(validate_statefulset, self.kind, obj, old)


class DaemonSetStrategy(_Workload):
    kind = "DaemonSet"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.apps_errors(validate_daemonset, self.kind, obj, old)

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        out = super().prepare_for_create(w, obj)
        meta = out["metadata"]
        annotations = dict(meta.get("annotations") or {})
        annotations[TEMPLATE_GENERATION_ANNOTATION] = str(max(template_generation(obj), 1))
        meta["annotations"] = annotations
        return out

    def keep_server_fields(self, w: Write, new: Obj, old: Obj) -> Obj:
        out = super().keep_server_fields(w, new, old)
        if w.subresource is None:
            # A client cannot set the template generation; a changed template bumps it.
            generation = template_generation(old)
            if (out.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
                generation += 1
            return _with_template_generation(out, generation)
        if w.subresource == "status":
            return _with_template_generation(out, template_generation(old))
        return out


def template_generation(obj: Obj) -> int:
    """The DaemonSet's template generation, from its apps/v1 annotation (0 if absent or unparsable)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _with_template_generation(obj: Obj, generation: int) -> Obj:
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), TEMPLATE_GENERATION_ANNOTATION: str(generation)}
    return {**obj, "metadata": meta}


STRATEGIES: tuple[Strategy, ...] = (DeploymentStrategy(), ReplicaSetStrategy(), StatefulSetStrategy(),
                                    DaemonSetStrategy())
