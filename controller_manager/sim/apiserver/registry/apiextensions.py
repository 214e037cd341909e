"""apiextensions.k8s.io: CustomResourceDefinitions, and the custom resources their served versions make
(apiextensions-apiserver's registries). Both defer to the server's :class:`~..crd.registry.CustomResources`,
which holds what is served:

- CustomResourceDefinition: defaulted, names checked and Established on each write, validated by its own
  rules; a stored write (re)serves its versions, removal stops them; a delete first adds the cleanup finalizer
  and deletes the instances.
- Custom resources: pruned and defaulted by their schema, generation bumped by any change but to metadata
  (and status), a ``/status`` write changes only status; validated by their schema; no creates while their
  CRD is being deleted; ``/scale`` by the CRD's scale paths; shown in the version asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.crd import definition, structural
from controller_manager.sim.apiserver.crd import scale as crd_scale
from controller_manager.sim.apiserver.crd.registry import view as crd_view
from controller_manager.sim.apiserver.crd.resource import CUSTOMRESOURCEDEFINITIONS, CustomResource
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.watch import View

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer


class CustomResourceDefinitionStrategy(Strategy):
    group = CUSTOMRESOURCEDEFINITIONS.group
    kind = CUSTOMRESOURCEDEFINITIONS.kind

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        return w.api.crds.prepare_create(w.res, super().prepare_for_create(w, obj))

    def prepare_for_update(self, w: Write, new: Obj, old: Obj) -> Obj:
        return w.api.crds.prepare_update(w.res, super().prepare_for_update(w, new, old), old, w.subresource)

    def validate(self, w: Write, obj: Obj, old: Obj | None) -> list[FieldError]:
        return definition.validate(obj, old, w.subresource)

    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        api.crds.written(res, obj)

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        api.crds.removed(res, obj)

    def before_delete(self, api: ApiServer, res: Resource, name: str, dry_run: bool) -> None:
        api.crds.before_delete(res, name, dry_run)

    def after_delete(self, api: ApiServer, res: Resource, name: str, dry_run: bool) -> None:
        api.crds.after_delete(res, name, dry_run)


class CustomResourceStrategy(Strategy):
    """Every custom resource's strategy: the lookup gives it to any :class:`CustomResource`."""

    has_scale = True
    go_type = False

    def view(self, res: Resource) -> View | None:
        assert isinstance(res, CustomResource)
        return crd_view(res)

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        return w.api.crds.prepare_create(w.res, super().prepare_for_create(w, obj))

    def prepare_for_update(self, w: Write, new: Obj, old: Obj) -> Obj:
        return w.api.crds.prepare_update(w.res, super().prepare_for_update(w, new, old), old, w.subresource)

    def validate(self, w: Write, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = super().validate(w, obj, old) + structural.validate_object(w.res, obj)
        return errs + structural.validate_rules(w.res, obj, old, errs)  # (its CEL rules, after the schema's)

    def admit_create(self, w: Write) -> None:
        w.api.crds.admit(w.res, "create")

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        api.crds.removed(res, obj)

    def scale_of(self, res: Resource, obj: Obj) -> Obj:
        assert isinstance(res, CustomResource)
        return crd_scale.scale_of(res, obj)

    def with_replicas(self, res: Resource, obj: Obj, replicas: int) -> Obj:
        assert isinstance(res, CustomResource)
        return crd_scale.with_replicas(res, obj, replicas)


CUSTOM_RESOURCE = CustomResourceStrategy()
STRATEGIES: tuple[Strategy, ...] = (CustomResourceDefinitionStrategy(),)
