"""Deletion, as ``registry.Store.Delete`` and ``rest.BeforeDelete`` decide it.

Guarantees:
- Preconditions (uid, resourceVersion) that do not match are a 409 Conflict with upstream's message.
- Kinds whose strategy says so delete gracefully (Pods, :mod:`registry.core`): a pod bound to a node gets
  ``deletionTimestamp`` (now + grace) and ``deletionGracePeriodSeconds`` and stays until deleted again with
  grace 0 (its kubelet does this); an unbound or terminated pod, or ``gracePeriodSeconds=0``, goes at once.
  A later delete may only shorten the grace period. The first graceful mark bumps ``generation``.
- An object with finalizers is only marked (``deletionTimestamp`` now, ``deletionGracePeriodSeconds`` 0,
  generation bumped) and is removed by the update that clears its last finalizer.
- ``propagationPolicy`` Foreground adds ``foregroundDeletion``, Orphan (or ``orphanDependents``) adds
  ``orphan``, Background removes both; with no policy the object's existing finalizers decide, else the
  default (Background for every served version).
- Namespaces (their strategy calls :func:`delete_namespace`): the first delete moves them to ``Terminating``;
  they go once ``spec.finalizers`` is empty (``/finalize``). ``default``, ``kube-system`` and
  ``kube-public`` may not be deleted.
- The result is the object (kinds whose strategy returns deleted objects: pods, namespaces, services,
  claims, volumes; or any object still present) or a Success Status naming the deleted object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import format_time, parse_time
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.objects import Obj, Stored
from controller_manager.sim.apiserver.registry import strategy_for

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


@dataclass
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    orphan_dependents: bool | None = None
    preconditions: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False


def delete(api: ApiServer, res: Resource, namespace: str | None, name: str, options: DeleteOptions
           ) -> Stored | Obj:
    if options.propagation_policy not in (None, "", "Orphan", "Background", "Foreground"):
        raise _invalid_options("propagationPolicy", options.propagation_policy,
                               'supported values: "Orphan", "Background", "Foreground"')
    if options.orphan_dependents is not None and options.propagation_policy:
        raise _invalid_options("propagationPolicy", options.propagation_policy,
                               "orphanDependents and deletionPropagation cannot be both set")
    kind = strategy_for(res)
    kind.check_delete(res, name)
    existing = api.get_stored(res, namespace, name)
    return kind.delete(api, res, existing, options)


def _invalid_options(field_name: str, value: Any, why: str) -> errors.StatusError:
    message = f'{field_name}: Unsupported value: "{value}": {why}'
    return errors.invalid("meta.k8s.io", "DeleteOptions", "", [("FieldValueNotSupported", field_name, message)])


def _check_preconditions(res: Resource, meta: Obj, pre: dict[str, Any]) -> None:
    uid = pre.get("uid")
    if uid is not None and uid != meta.get("uid"):
        raise errors.conflict(res.group, res.kind, meta["name"],
                              f"the UID in the precondition ({uid}) does not match the UID in record "
                              f"({meta.get('uid')}). The object might have been deleted and then recreated")
    rv = pre.get("resourceVersion")
    if rv is not None and str(rv) != meta.get("resourceVersion"):
        raise errors.conflict(res.group, res.kind, meta["name"],
                              f"the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion "
                              f"in record ({meta.get('resourceVersion')}). The object might have been modified")


def _gc_finalizers(meta: Obj, options: DeleteOptions) -> list[str] | None:
    """The finalizers after applying the propagation policy; None when they stay as they are."""
    current = list(meta.get("finalizers") or [])
    orphan = foreground = False
    if options.orphan_dependents is not None:
        orphan = options.orphan_dependents
    elif options.propagation_policy:
        orphan = options.propagation_policy == "Orphan"
        foreground = options.propagation_policy == "Foreground"
    else:
        for f in current:
            if f == ORPHAN:
                orphan = True
                break
            if f == FOREGROUND:
                foreground = True
                break
    new = [f for f in current if f not in (ORPHAN, FOREGROUND)]
    if orphan:
        new.append(ORPHAN)
    if foreground:
        new.append(FOREGROUND)
    return None if set(new) == set(current) else new


def _graceful(api: ApiServer, res: Resource, obj: Obj, options: DeleteOptions) -> tuple[bool, bool, Obj]:
    """rest.BeforeDelete: (graceful, pending, object with the graceful-deletion marks)."""
    meta = dict(obj["metadata"])
    grace = options.grace_period_seconds
    if grace is not None and grace < 0:
        grace = 1
    kind = strategy_for(res)
    if not kind.graceful_delete:
        return False, False, obj
    if meta.get("deletionTimestamp"):
        current = meta.get("deletionGracePeriodSeconds")
        if not current:
            return False, False, obj
        if grace is None or grace >= current:
            return False, True, obj
        ts = parse_time(meta["deletionTimestamp"]) or api.clock.now()
        meta["deletionTimestamp"] = format_time(ts - current + grace)
        meta["deletionGracePeriodSeconds"] = grace
        return True, False, {**obj, "metadata": meta}
    period = kind.grace_period(obj, grace)
    meta["deletionTimestamp"] = format_time(api.clock.now() + period)
    meta["deletionGracePeriodSeconds"] = period
    if meta.get("generation"):
        meta["generation"] = int(meta["generation"]) + 1
    return True, False, {**obj, "metadata": meta}


def _mark_as_deleting(api: ApiServer, obj: Obj) -> Obj:
    meta = dict(obj["metadata"])
    now = api.clock.now()
    if not meta.get("deletionTimestamp") and meta.get("generation"):
        meta["generation"] = int(meta["generation"]) + 1
    existing = parse_time(meta.get("deletionTimestamp"))
    if existing is None or existing > now:
        meta["deletionTimestamp"] = format_time(now)
    meta["deletionGracePeriodSeconds"] = 0
    return {**obj, "metadata": meta}


def _finalize(res: Resource, stored: Stored) -> Stored | Obj:
    if strategy_for(res).returns_deleted_object:
        return stored
    meta = stored.obj["metadata"]
    return errors.success(200, errors.details(name=meta.get("name", ""), group=res.group, kind=res.plural,
                                              uid=meta.get("uid", "")))


def delete_object(api: ApiServer, res: Resource, existing: Stored, options: DeleteOptions) -> Stored | Obj:
    store = api.store(res)
    _check_preconditions(res, existing.obj["metadata"], options.preconditions)
    graceful, pending, obj = _graceful(api, res, existing.obj, options)
    if pending:
        return _finalize(res, existing)
    new_finalizers = _gc_finalizers(obj["metadata"], options)
    if graceful or existing.obj["metadata"].get("finalizers") or new_finalizers is not None:
        if new_finalizers is not None:
            obj = {**obj, "metadata": {**obj["metadata"], "finalizers": new_finalizers}}
            if not new_finalizers:
                del obj["metadata"]["finalizers"]
        has_finalizers = bool(obj["metadata"].get("finalizers"))
        if not graceful:
            if has_finalizers:
                return api._commit(store, existing.key, _mark_as_deleting(api, obj), options.dry_run)
        else:
            updated = api._commit(store, existing.key, obj, options.dry_run)
            if has_finalizers or obj["metadata"].get("deletionGracePeriodSeconds"):
                return updated
            existing = updated
    if options.dry_run:
        return _finalize(res, existing)
    return _finalize(res, api._remove(store, existing.key, False))


def delete_namespace(api: ApiServer, res: Resource, existing: Stored, options: DeleteOptions) -> Stored | Obj:
    meta = existing.obj["metadata"]
    uid = options.preconditions.get("uid")
    if uid is not None and uid != meta.get("uid"):
        raise errors.conflict("", "namespaces", meta["name"],
                              f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}")
    if not meta.get("deletionTimestamp"):
        _check_preconditions(res, meta, options.preconditions)
        new_meta = {**meta, "deletionTimestamp": format_time(api.clock.now())}
        finalizers = list(meta.get("finalizers") or [])
        want_orphan = _should_have(options, ORPHAN in finalizers, "Orphan")
        want_foreground = _should_have(options, FOREGROUND in finalizers, "Foreground")
        changed = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
        changed += [ORPHAN] if want_orphan else []
        changed += [FOREGROUND] if want_foreground else []
        if set(changed) != set(finalizers):
            new_meta["finalizers"] = changed
            if not changed:
                del new_meta["finalizers"]
        status = {**(existing.obj.get("status") or {}), "phase": "Terminating"}
        return api._commit(api.store(res), existing.key, {**existing.obj, "metadata": new_meta, "status": status},
                           options.dry_run)
    if (existing.obj.get("spec") or {}).get("finalizers"):
        return existing
    return delete_object(api, res, existing, options)


def _should_have(options: DeleteOptions, have: bool, policy: str) -> bool:
    if options.orphan_dependents is not None:
        return options.orphan_dependents == (policy == "Orphan")
    if options.propagation_policy:
        return options.propagation_policy == policy
    return have
