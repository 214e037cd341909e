"""The generic store's behaviour: what every kind gets unless its own strategy says otherwise.

A :class:`Strategy` holds one kind's rules, as upstream's ``pkg/registry/<group>/<kind>/strategy.go`` and the
``genericregistry.Store`` fields beside it do. :class:`ApiServer` runs every write through the same steps in
the same order (defaults → mutating admission (:meth:`Strategy.mutating_admission`) → mutating webhooks →
:meth:`Strategy.before_create` → PrepareForCreate and validation (:meth:`Strategy.create_steps`) →
validating webhooks → validating admission and quota → Go's JSON form → managedFields) and asks the
strategy at each kind-dependent point; it holds no kind of its own.

Guarantees (all methods build new dicts; inputs are never mutated):
- Create clears server-owned status (kinds with a ``/status`` subresource start with an empty one) and
  starts ``metadata.generation`` at 1 for kinds that track it.
- A main-resource update keeps the stored status; ``generation`` is bumped only when the spec changes. A
  ``/status`` update keeps the stored spec and the metadata the kind's status strategy resets.
- The generic metadata rules of ``rest.BeforeUpdate``: uid, creationTimestamp, deletionTimestamp,
  deletionGracePeriodSeconds and generation cannot be changed by a client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from controller_manager.api import selectors
from controller_manager.api.meta import format_time
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors, validation
from controller_manager.sim.apiserver.objects import Obj, Stored
from controller_manager.sim.apiserver.strategy import has_status
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn, name_is_dns_subdomain
from controller_manager.sim.apiserver.watch import View

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth import User
    from controller_manager.sim.apiserver.deletion import DeleteOptions
    from controller_manager.sim.apiserver.server import ApiServer

_NOT_SPEC = frozenset({"metadata", "status", "kind", "apiVersion"})


@dataclass(frozen=True)
class Write:
    """One write as the strategy sees it: the server, the resource written through, the request's namespace,
    the subresource (None: the main resource) and, for an update, the stored object's key."""

    api: ApiServer
    res: Resource
    namespace: str | None
    subresource: str | None = None
    key: str = ""

    def now(self) -> str:
        return format_time(self.api.clock.now())

    def on(self, res: Resource) -> Write:
        """The same write, through another resource (the one an object is stored as)."""
        return Write(self.api, res, self.namespace, self.subresource, self.key)


def spec_of(obj: Obj) -> Obj:
    """Everything a user declares: all top-level fields but metadata, status and type meta."""
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def copy_field(meta: Obj, old_meta: Any, field: str) -> None:
    if field in old_meta:
        meta[field] = old_meta[field]
    else:
        meta.pop(field, None)


def stored_objects(api: ApiServer, res: Resource, namespace: str | None) -> list[Obj]:
    """The stored objects themselves, not copies, for checks that only read them (none if not served)."""
    if api.lookup(res.group, res.version, res.plural) is None:
        return []
    return [stored.obj for stored in api.store(res).iter_from(namespace)]


class Strategy:
    """The generic store's rules; a kind's strategy overrides what its registry does differently."""

    group: str = ""
    kind: str = ""
    # AllowCreateOnUpdate: a PUT to a missing name creates the object (else 404).
    allow_create_on_update: ClassVar[bool] = False
    # AllowUnconditionalUpdate: an update without metadata.resourceVersion is accepted (else 422).
    allow_unconditional_update: ClassVar[bool] = True
    # The API server maintains metadata.generation.
    tracks_generation: ClassVar[bool] = False
    # metadata fields a /status update may not change (the status strategy's reset fields).
    status_reset_meta: ClassVar[tuple[str, ...]] = ()
    # The kind's defaults touch nothing but its spec, which a /status write takes from the stored object: such
    # a write (without webhooks to show the defaulted object to) need not default the spec it sent.
    defaults_spec_only: ClassVar[bool] = False
    # DELETE answers with the object rather than a Success Status (ReturnDeletedObject).
    returns_deleted_object: ClassVar[bool] = False
    # Deletion is graceful (RESTGracefulDeleteStrategy): see grace_period.
    graceful_delete: ClassVar[bool] = False
    # NamespaceLifecycle admission guards writes of this kind (reviews are never stored: it does not).
    namespace_lifecycle: ClassVar[bool] = True
    # A create's body is decoded into the kind (reviews take theirs in the authenticator or authorizer).
    decodes_body: ClassVar[bool] = True
    # An object of this kind is the namespace of the requests about it (RequestInfo: Namespaces).
    names_own_namespace: ClassVar[bool] = False
    # The kind serves /scale (when its resource lists the subresource).
    has_scale: ClassVar[bool] = False
    # The kind is a Go type: strategic merge patches read its patch tags, a patch's numbers keep their text
    # for its typed decode, a /scale apply is tracked on its autoscaling/v1 Scale (custom resources: none).
    go_type: ClassVar[bool] = True
    # Objects are computed on each read, not stored (metrics.k8s.io): see read.
    computed: ClassVar[bool] = False
    # The warning every request of the kind gets (its Go type's APILifecycleDeprecated), or "".
    deprecation_warning: ClassVar[str] = ""

    # --- storage and reads ----------------------------------------------------------------------

    def store_key(self, res: Resource) -> tuple[str, str]:
        """Which store holds the objects: resources with one key share it."""
        return (res.group, res.plural)

    def storage(self, res: Resource) -> Resource:
        """The resource objects are stored and written as (events.k8s.io Events are stored as core Events)."""
        return res

    def view(self, res: Resource) -> View | None:
        """How stored objects are shown through ``res``, when not as stored (None)."""
        return None

    def read(self, api: ApiServer, res: Resource, verb: str, namespace: str | None, name: str,
             query: Any) -> Obj:
        """A computed kind's get (``verb`` "get") or list."""
        raise errors.method_not_allowed()

    async def read_async(self, api: ApiServer, res: Resource, verb: str, namespace: str | None, name: str,
                         query: Any) -> Obj:
        """A computed kind's get or list as the HTTP face asks for it: :meth:`read` unless the kind awaits
        something to answer (componentstatuses probe the control plane)."""
        return self.read(api, res, verb, namespace, name, query)

    # --- create ------------------------------------------------------------------------------------

    def on_create_request(self, obj: Obj, user: User) -> Obj:
        """What the registry takes from the requesting user before the create (nothing by default)."""
        return obj

    def answer_create(self, api: ApiServer, res: Resource, subresource: str | None, namespace: str | None,
                      name: str, body: Any, user: User, dry_run: bool) -> Obj | None:
        """The answer to a POST this kind handles without storing the body (reviews, subresources), or None."""
        return None

    def mutating_admission(self, api: ApiServer, obj: Obj, namespace: str | None) -> Obj:
        """The mutating admission plugins that apply to this kind: ``obj``, which is the create's own and may be
        changed in place, or what they made of it."""
        return obj

    def validating_admission(self, api: ApiServer, obj: Obj) -> None:
        """Validating admission of this kind's own (before LimitRanger and ResourceQuota)."""

    def before_create(self, w: Write, obj: Obj) -> Obj:
        """Kind steps after mutating admission, before PrepareForCreate (allocations, generated fields)."""
        return obj

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        """PrepareForCreate: status reset, generation 1."""
        out = dict(obj)
        meta = dict(out.get("metadata") or {})
        if has_status(w.res):
            out["status"] = {}
        if self.tracks_generation:
            meta["generation"] = 1
        out["metadata"] = meta
        return out

    def create_steps(self, w: Write, obj: Obj) -> Obj:
        """PrepareForCreate, then validation (raising 422): the object to store."""
        obj = self.prepare_for_create(w, obj)
        self.check(w, obj, None)
        return obj

    def admit_create(self, w: Write) -> None:
        """A refusal of any create of this kind right now (after validation)."""

    def after_create(self, api: ApiServer, obj: Obj) -> None:
        """AfterCreate: run once the object is stored (not on dry runs)."""

    # --- update ------------------------------------------------------------------------------------

    def before_update(self, w: Write, obj: Obj, old: Obj) -> Obj:
        """Kind steps after defaulting, before PrepareForUpdate (allocations)."""
        return obj

    def keep_server_fields(self, w: Write, new: Obj, old: Obj) -> Obj:
        """The client's ``new`` with what it may not write through this endpoint taken from ``old``."""
        if w.subresource == "status":
            return self.status_update(new, old)
        out = dict(new)
        if has_status(w.res):
            if "status" in old:
                out["status"] = old["status"]
            else:
                out.pop("status", None)
        return out

    def status_update(self, new: Obj, old: Obj) -> Obj:
        """A /status write: the stored spec, and the stored values of the status strategy's reset metadata."""
        out = {**new, **{k: v for k, v in old.items() if k not in _NOT_SPEC}}
        for k in [k for k in out if k not in _NOT_SPEC and k not in old]:
            del out[k]
        meta = dict(out.get("metadata") or {})
        old_meta = old.get("metadata") or {}
        for field in self.status_reset_meta:
            copy_field(meta, old_meta, field)
        out["metadata"] = meta
        return out

    def prepare_for_update(self, w: Write, new: Obj, old: Obj) -> Obj:
        """PrepareForUpdate and rest.BeforeUpdate's metadata rules (generation not yet final)."""
        return self.carry_system_metadata(self.keep_server_fields(w, new, old), old, main=w.subresource is None)

    def generation_changed(self, new: Obj, old: Obj, *, main: bool) -> bool:
        """Whether the update bumps metadata.generation (kinds that track it: a changed spec)."""
        return self.tracks_generation and spec_of(new) != spec_of(old)

    def carry_system_metadata(self, new: Obj, old: Obj, *, main: bool) -> Obj:
        meta = dict(new.get("metadata") or {})
        old_meta = old.get("metadata") or {}
        for field in ("creationTimestamp", "deletionTimestamp"):
            copy_field(meta, old_meta, field)
        if not meta.get("uid"):
            meta["uid"] = old_meta.get("uid")
        if "deletionGracePeriodSeconds" in old_meta and meta.get("deletionGracePeriodSeconds") is None:
            meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        elif "deletionGracePeriodSeconds" not in old_meta:
            meta.pop("deletionGracePeriodSeconds", None)
        generation = old_meta.get("generation")
        if generation is not None:
            if self.generation_changed({**new, "metadata": meta}, old, main=main):
                generation += 1
            meta["generation"] = generation
        else:
            meta.pop("generation", None)
        meta.pop("selfLink", None)
        return {**new, "metadata": meta}

    def update_steps(self, w: Write, obj: Obj, old: Obj) -> Obj:
        """PrepareForUpdate, then validation against ``old`` (raising 422): the object to store."""
        new = self.prepare_for_update(w, obj, old)
        self.check(w, new, old)
        return new

    def holds_removal(self, obj: Obj) -> bool:
        """Whether an object marked for deletion and without finalizers still stays (a kind's own finalizers)."""
        return False

    # --- validation --------------------------------------------------------------------------------

    def name_rule(self, obj: Obj) -> NameFn:
        """The form ``metadata.name`` must have (ValidateObjectMeta's name function)."""
        return name_is_dns_subdomain

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        """The kind's own field rules (its ``pkg/apis/<group>/validation``), for a create or an update."""
        return []

    def field_errors(self, res: Resource, obj: Obj, old: Obj | None, *,
                     subresource: str | None = None) -> list[FieldError]:
        """ObjectMeta's checks by the kind's name rule, then (on the main resource) the kind's rules."""
        errs = validation.object_meta_errors(res, obj, old, self.name_rule(obj))
        if subresource is None:
            errs.extend(self.validate_kind(obj, old))
        return errs

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        """What the status strategy checks of the status itself on a /status update."""
        return []

    def validate(self, w: Write, obj: Obj, old: Obj | None) -> list[FieldError]:
        """Validate / ValidateUpdate on a write: the field errors of ``obj`` (over ``old`` for an update). A
        /status write keeps the stored spec: its strategy checks metadata and status, never spec rules."""
        if w.subresource != "status":
            return self.field_errors(w.res, obj, old)
        errs = self.field_errors(w.res, obj, old, subresource="status")
        return errs + self.status_errors(obj, old) if old is not None else errs

    def check(self, w: Write, obj: Obj, old: Obj | None) -> None:
        errs = self.validate(w, obj, old)
        if errs:
            raise errors.StatusError(validation.invalid_status(w.res, obj["metadata"].get("name", ""), errs))

    # --- after writes ------------------------------------------------------------------------------

    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        """Run after each stored write of an object (not on dry runs)."""

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        """Run once an object has left the store (not on dry runs)."""

    # --- delete ------------------------------------------------------------------------------------

    def before_delete(self, api: ApiServer, res: Resource, name: str, dry_run: bool) -> None:
        """Run before a DELETE request is handled."""

    def after_delete(self, api: ApiServer, res: Resource, name: str, dry_run: bool) -> None:
        """Run after a DELETE request was handled."""

    def check_delete(self, res: Resource, name: str) -> None:
        """A refusal of deleting ``name`` whatever its state."""

    def delete(self, api: ApiServer, res: Resource, existing: Stored, options: DeleteOptions) -> Stored | Obj:
        """registry.Store.Delete for one stored object."""
        from controller_manager.sim.apiserver import deletion

        return deletion.delete_object(api, res, existing, options)

    def grace_period(self, obj: Obj, grace: int | None) -> int:
        """CheckGracefulDelete: the grace period of a first graceful delete (``grace``: the request's)."""
        return grace or 0

    # --- /scale --------------------------------------------------------------------------------------

    def scale_selector(self, selector: Any) -> str:
        """The Scale's ``status.selector``: the kind's label selector in string form."""
        try:
            return str(selectors.from_label_selector(selector)) if selector is not None else ""
        except selectors.InvalidSelector:
            return ""

    def scale_of(self, res: Resource, obj: Obj) -> Obj:
        """The object's autoscaling/v1 Scale."""
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                      if k in meta}
        return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta,
                "spec": {"replicas": int(spec.get("replicas", 1) or 0)},
                "status": {"replicas": int(status.get("replicas") or 0),
                           "selector": self.scale_selector(spec.get("selector"))}}

    def with_replicas(self, res: Resource, obj: Obj, replicas: int) -> Obj:
        """The object with the replicas a /scale write asks for."""
        return {**obj, "spec": {**(obj.get("spec") or {}), "replicas": replicas}}
