"""What the API server serves for the CRDs it stores, and the CRD cleanup finalizer.

Guarantees:
- A CRD is checked by the naming controller's rules when it is written: its names are accepted (status
  ``acceptedNames``, condition NamesAccepted ``NoConflicts``) unless another CRD of its group holds one,
  and an accepted CRD is Established (``InitialNamesAccepted``) at once; upstream's controllers do the
  same within milliseconds of the create.
- Each served version of an Established CRD is a resource of the server (discovery, paths, RBAC) from
  the write that established it on; every version shares one store, as upstream keeps one etcd prefix.
- Deleting a CRD first adds the ``customresourcecleanup.apiextensions.k8s.io`` finalizer and the
  Terminating condition; its instances are then deleted (creates are refused meanwhile), and once the
  last one is gone the finalizer is removed, the CRD deleted and its resources no longer served.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import orjson

from controller_manager.api.meta import format_time
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.crd import definition, structural
from controller_manager.sim.apiserver.crd.resource import CUSTOMRESOURCEDEFINITIONS, CustomResource, is_definition
from controller_manager.sim.apiserver.watch import View, full_view

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
_NAME_ORDER = ("plural", "singular", "shortNames", "kind", "listKind", "categories")  # the Go struct's order


class CustomResources:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.served: dict[str, list[CustomResource]] = {}  # CRD name -> its served versions
        self._finalizing: set[str] = set()  # CRDs whose instances are being deleted right now

    def _now(self) -> str:
        return format_time(self.api.clock.now())

    # --- the CRD's own writes ---------------------------------------------------------------------

    def prepare_create(self, res: Resource, obj: Obj) -> Obj:
        """A new CRD's status: names accepted and Established, or NamesAccepted False on a conflict."""
        if not is_definition(res):
            if not isinstance(res, CustomResource):
                return obj
            if "status" in res.subresources:  # a create cannot set the status
                obj = {k: v for k, v in obj.items() if k != "status"}
            return _with_generation(_stored_form(res, obj), 1)
        obj = definition.prepare_for_create(definition.apply_defaults(obj))
        return self._names(obj)

    def prepare_update(self, res: Resource, new: Obj, old: Obj, subresource: str | None) -> Obj:
        if is_definition(res):
            if subresource is None:
                new = definition.apply_defaults(new)
            new = definition.prepare_for_update(new, old, subresource)
            if subresource is None and not definition.is_terminating(new):
                new = self._names(new)
            return new
        if isinstance(res, CustomResource) and subresource == "status":
            # A status write changes the status only: everything else, metadata included, stays as stored.
            kept = {k: v for k, v in old.items() if k != "status"}
            return {**kept, "status": new["status"]} if "status" in new else kept
        if isinstance(res, CustomResource):
            # Any change but to metadata (and, with a status subresource, to status) bumps the generation.
            generation = int((old.get("metadata") or {}).get("generation") or 1)
            new = _stored_form(res, new)
            if subresource is None and _content(new) != _content(old):
                generation += 1
            return _with_generation(new, generation)
        return new

    def _names(self, obj: Obj) -> Obj:
        now = self._now()
        name = obj["metadata"].get("name")
        others = [s.obj for s in self.api.store(CUSTOMRESOURCEDEFINITIONS).iter_from(None)
                  if s.obj["metadata"].get("name") != name]
        conflict = definition.conflicts(obj, others, self.api.builtin_resources)
        if conflict is not None:
            obj = definition.with_condition(obj, "NamesAccepted", "False", conflict[0], conflict[1], now)
            if not definition.is_established(obj):
                obj = definition.with_condition(obj, "Established", "False", "NotAccepted",
                                                "not all names are accepted", now)
            return obj
        names = (obj.get("spec") or {}).get("names") or {}
        status = obj["status"]
        status["acceptedNames"] = {k: names[k] for k in _NAME_ORDER if k in names}
        obj["status"] = {k: status[k] for k in ("conditions", "acceptedNames", "storedVersions") if k in status}
        obj = definition.with_condition(obj, "NamesAccepted", "True", "NoConflicts", "no conflicts found", now)
        if not definition.is_established(obj):
            obj = definition.with_condition(obj, "Established", "True", "InitialNamesAccepted",
                                            "the initial names have been accepted", now)
        return obj

    def validate(self, res: Resource, obj: Obj, old: Obj | None, subresource: str | None) -> list[Any] | None:
        """The CRD's validation errors (None: not a CRD, the generic rules apply)."""
        if not is_definition(res):
            return None
        return definition.validate(obj, old, subresource)

    def admit(self, res: Resource, verb: str) -> None:
        """A custom resource whose CRD is being deleted takes no new objects (405, as upstream's crdHandler)."""
        if verb != "create" or not isinstance(res, CustomResource):
            return
        crd = self.api.store(CUSTOMRESOURCEDEFINITIONS).get(res.crd_name)
        if crd is None or definition.is_terminating(crd.obj):
            raise errors.StatusError(errors.status(
                405, "MethodNotAllowed", f'create is not supported on resources of kind "{res.group_resource}"',
                errors.details(group=res.group, kind=res.plural)))

    # --- after each write -------------------------------------------------------------------------

    def written(self, res: Resource, obj: Obj) -> None:
        if is_definition(res):
            self._serve(obj)

    def removed(self, res: Resource, obj: Obj) -> None:
        if is_definition(res):
            self._unserve(obj["metadata"]["name"])
        elif isinstance(res, CustomResource):
            crd = self.api.store(CUSTOMRESOURCEDEFINITIONS).get(res.crd_name)
            if crd is not None and crd.obj["metadata"].get("deletionTimestamp") and \
                    definition.CLEANUP_FINALIZER in (crd.obj["metadata"].get("finalizers") or []) and \
                    res.crd_name not in self._finalizing:
                self.finalize(res.crd_name)

    def _serve(self, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        wanted = definition.served_resources(obj) if definition.is_established(obj) else []
        if wanted == self.served.get(name, []) and all(
                a.schema == b.schema and a.columns == b.columns and a.scale == b.scale
                for a, b in zip(wanted, self.served.get(name, []), strict=True)):
            return
        self.api.unserve(self.served.pop(name, []), keep_store=bool(wanted))
        if wanted:
            self.served[name] = wanted
            self.api.serve(wanted)

    def _unserve(self, name: str) -> None:
        self.api.unserve(self.served.pop(name, []), keep_store=False)

    # --- deletion ---------------------------------------------------------------------------------

    def before_delete(self, res: Resource, name: str, dry_run: bool) -> None:
        """The first delete of a CRD adds the cleanup finalizer and the Terminating condition."""
        if not is_definition(res) or dry_run:
            return
        stored = self.api.store(CUSTOMRESOURCEDEFINITIONS).get(name)
        if stored is None or stored.obj["metadata"].get("deletionTimestamp"):
            return
        obj = definition.with_condition(stored.obj, "Terminating", "True", "InstanceDeletionPending",
                                        "CustomResourceDefinition marked for deletion; CustomResource deletion "
                                        "will begin soon", self._now())
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if definition.CLEANUP_FINALIZER not in finalizers:
            obj["metadata"]["finalizers"] = [*finalizers, definition.CLEANUP_FINALIZER]
        self.api.write_update(CUSTOMRESOURCEDEFINITIONS, stored, obj, False)

    def after_delete(self, res: Resource, name: str, dry_run: bool) -> None:
        if is_definition(res) and not dry_run:
            self.finalize(name)

    def finalize(self, name: str) -> None:
        """The finalizer controller's pass: delete the instances; once none is left, let the CRD go."""
        store = self.api.store(CUSTOMRESOURCEDEFINITIONS)
        stored = store.get(name)
        if stored is None or definition.CLEANUP_FINALIZER not in (stored.obj["metadata"].get("finalizers") or []):
            return
        served = self.served.get(name, [])
        if served and definition.is_established(stored.obj):
            terminating = definition.condition(stored.obj, "Terminating") or {}
            if terminating.get("reason") != "InstanceDeletionInProgress":
                obj = definition.with_condition(stored.obj, "Terminating", "True", "InstanceDeletionInProgress",
                                                "CustomResource deletion is in progress", self._now())
                stored = self.api.write_update(CUSTOMRESOURCEDEFINITIONS, stored, obj, False)
            self._finalizing.add(name)
            try:
                self._delete_instances(served[0])
            finally:
                self._finalizing.discard(name)
            if len(self.api.store(served[0])):
                return  # instances with finalizers of their own: checked again as each goes
            stored = store.get(name)
            if stored is None:
                return
            obj = definition.with_condition(stored.obj, "Terminating", "False", "InstanceDeletionCompleted",
                                            "removed all instances", self._now())
        else:
            obj = definition.with_condition(stored.obj, "Terminating", "False", "NeverEstablished",
                                            "resource was never established", self._now())
        obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or []
                                         if f != definition.CLEANUP_FINALIZER]
        self.api.write_update(CUSTOMRESOURCEDEFINITIONS, stored, obj, False)

    def _delete_instances(self, res: CustomResource) -> None:
        for item in list(self.api.store(res).iter_from(None)):
            meta = item.obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            try:
                self.api.delete(res, meta.get("namespace"), meta["name"])
            except errors.StatusError as e:
                if e.code != 404:
                    raise


def view(res: CustomResource) -> View:
    """How stored objects are shown in ``res``'s version: defaulted by the storage version's schema (as
    upstream defaults on reading from etcd, so a default added later shows on older objects), and with
    ``res``'s apiVersion (upstream's ``None`` conversion strategy)."""
    api_version = res.api_version
    schema = res.storage_schema if isinstance(res.storage_schema, dict) else None
    if schema is not None and not _has_defaults(schema):
        schema = None
    # Views are cached beside each stored version: the key names the schema they were defaulted by.
    key = api_version if schema is None else f"{api_version}#{hashlib.sha256(orjson.dumps(schema)).hexdigest()}"

    def convert(obj: Obj) -> Obj:
        out = {k: (api_version if k == "apiVersion" else v) for k, v in obj.items()}
        return structural.default(schema, out) if schema is not None else out

    if schema is None:
        return lambda s: full_view(s) if s.obj.get("apiVersion") == api_version else s.view(key, convert)
    return lambda s: s.view(key, convert)


def _has_defaults(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "default" in schema or any(_has_defaults(v) for k, v in schema.items() if k != "default")
    if isinstance(schema, list):
        return any(_has_defaults(v) for v in schema)
    return False


def _stored_form(res: CustomResource, obj: Obj) -> Obj:
    if not res.storage_version or obj.get("apiVersion") == res.storage_version:
        return obj
    return {k: (res.storage_version if k == "apiVersion" else v) for k, v in obj.items()}


def _content(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k != "metadata"}


def _with_generation(obj: Obj, generation: int) -> Obj:
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "generation": generation}}
