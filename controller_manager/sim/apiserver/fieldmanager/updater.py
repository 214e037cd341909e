"""Who owns what after a write: SMD's ``merge.Updater`` and apimachinery's manager chain, for one version.

Managers of another apiVersion of the kind (an HPA written as autoscaling/v1 and /v2) lose fields by the
comparison of the write converted to their version (``other``), as the Updater's converter does.

- :func:`update` (an Update operation: create, update, non-apply patch): the fields the write changed
  (``Compare`` of the live and new object, less the kind's reset fields) go to the writer; other managers
  lose what was changed or removed. An empty change leaves everything, times included, as it was.
  A live object that has no managedFields is not tracked (``skipNonApplied``); creates always are.
  More than :data:`MAX_UPDATE_MANAGERS` Update managers: the oldest are merged into ``ancient-changes``.
- :func:`apply`: the configuration is merged into the live object; the applier owns exactly the configured
  fields; fields it owned before and no longer configures are removed unless someone else owns them;
  changing a field someone else owns is a :class:`Conflicts` unless forced (then they lose it).
Server-owned metadata (name, uid, resourceVersion, ...) is never owned (``stripMeta``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from controller_manager.sim.apiserver.fieldmanager import typed
from controller_manager.sim.apiserver.fieldmanager.fieldpath import EMPTY, Path, Set, field
from controller_manager.sim.apiserver.fieldmanager.managed import APPLY, UPDATE, Managed, ManagerId, VersionedSet

__all__ = ["ANCIENT_CHANGES", "BEFORE_FIRST_APPLY", "MAX_UPDATE_MANAGERS", "Conflicts", "apply", "identifier",
           "update"]

MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
BEFORE_FIRST_APPLY = "before-first-apply"

_META = field("metadata")
STRIPPED = Set.of((field("apiVersion"),), (field("kind"),), (_META,),
                  *((_META, field(f)) for f in ("name", "namespace", "creationTimestamp", "selfLink", "uid",
                                                "clusterName", "generation", "managedFields", "resourceVersion")))


class Conflicts(Exception):
    """Apply changed fields other managers own: (manager, path) pairs in upstream's order."""

    def __init__(self, conflicts: list[tuple[ManagerId, Path]]) -> None:
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts


def identifier(mid: ManagerId) -> str:
    """BuildManagerIdentifier's JSON (the sort key upstream groups conflicts by)."""
    entry: dict[str, str] = {"manager": mid.manager, "operation": mid.operation}
    if mid.api_version:
        entry["apiVersion"] = mid.api_version
    if mid.subresource:
        entry["subresource"] = mid.subresource
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False)


def without_managed_fields(obj: Any) -> Any:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


# The comparison of the write's old and new object in another apiVersion of the kind (both converted to
# it), or None when that version is no longer served (its managers are dropped).
OtherVersion = Callable[[str], "typed.Comparison | None"]
# Makes the above for a write from its old and new object (as the writer's version has them).
OtherVersions = Callable[[Any, Any], OtherVersion]


def _others_lose(managed: Managed, writer: ManagerId | None, cmp: typed.Comparison, force: bool,
                 version: str = "", other: OtherVersion | None = None) -> None:
    """merge.Updater.update: other managers lose changed fields (conflicts unless forced) and removed ones,
    each compared in its own apiVersion (``version`` is the write's; ``other`` compares in another)."""
    by_version: dict[str, typed.Comparison | None] = {version: cmp}
    conflicts: dict[ManagerId, Set] = {}
    removed: dict[ManagerId, Set] = {}
    for mid, vs in list(managed.fields.items()):
        if mid == writer:
            continue
        if other is None or not vs.api_version or vs.api_version == version:
            theirs: typed.Comparison | None = cmp
        elif vs.api_version in by_version:
            theirs = by_version[vs.api_version]
        else:
            theirs = by_version[vs.api_version] = other(vs.api_version)
        if theirs is None:
            del managed.fields[mid]  # a version no longer served: its manager is dropped
            managed.entries.pop(mid, None)
            managed.times.pop(mid, None)
            continue
        lost = vs.set.intersection(theirs.changed())
        if lost:
            conflicts[mid] = lost
        if not theirs.removed.empty():
            removed[mid] = theirs.removed
    if conflicts and not force:
        ordered = sorted(conflicts, key=identifier)
        raise Conflicts([(mid, p) for mid in ordered for p in conflicts[mid].paths()])
    for mid, vs in list(managed.fields.items()):
        if mid == writer:
            continue
        rest = vs.set
        if mid in conflicts:
            rest = rest.difference(conflicts[mid])
        if mid in removed:
            rest = rest.difference(removed[mid])
        if rest is not vs.set:
            if rest.empty():
                del managed.fields[mid]
            else:
                managed.fields[mid] = VersionedSet(rest, vs.api_version, vs.applied)


def update(managed: Managed, live: Any, new: Any, atom: typed.Atom, *, manager: str, api_version: str,
           subresource: str, ignored: Set | None, now: str, other_for: OtherVersions | None = None) -> Managed:
    """Ownership after an Update by ``manager`` (``managed`` is not mutated)."""
    live, new = without_managed_fields(live), without_managed_fields(new)
    cmp = typed.compare(live, new, atom).excluding(ignored)
    if cmp.is_same():
        return managed
    out = managed.copy()
    _others_lose(out, None, cmp, True, api_version, other_for(live, new) if other_for is not None else None)
    current = cmp.changed().difference(STRIPPED)
    if current:
        mid = ManagerId(manager or "unknown", UPDATE, api_version, subresource)
        previous = out.fields.get(mid)
        owned = current if previous is None else previous.set.union(current)
        out.fields[mid] = VersionedSet(owned, api_version, False)
        out.times[mid] = now
        out.entries.pop(mid, None)
    cap_update_managers(out)
    return out


def cap_update_managers(managed: Managed, limit: int = MAX_UPDATE_MANAGERS) -> None:
    """capManagersManager: beyond ``limit`` Update managers, the oldest go into one ``ancient-changes``
    entry per apiVersion (the first of a version is only renamed once a second joins it)."""
    updaters = [mid for mid, vs in managed.fields.items() if not vs.applied]
    if len(updaters) <= limit:
        return
    updaters.sort(key=lambda mid: (managed.times.get(mid) or "", identifier(mid)))
    first_of_version: dict[str, ManagerId] = {}
    length = len(updaters)
    for mid in updaters:
        if length <= limit:
            break
        vs = managed.fields[mid]
        bucket = ManagerId(ANCIENT_CHANGES, UPDATE, vs.api_version, "")
        first = first_of_version.get(vs.api_version)
        if first is None:
            first_of_version[vs.api_version] = mid
            continue
        if bucket not in managed.fields:
            managed.fields[bucket] = managed.fields.pop(first)
            managed.entries.pop(first, None)
            managed.times.pop(first, None)
        managed.fields[bucket] = VersionedSet(vs.set.union(managed.fields[bucket].set), vs.api_version, vs.applied)
        managed.entries.pop(bucket, None)
        del managed.fields[mid]
        managed.entries.pop(mid, None)
        managed.times[bucket] = managed.times.pop(mid, None)
        length -= 1


def raw_apply(managed: Managed, live: Any, config: Any, atom: typed.Atom, *, mid: ManagerId, api_version: str,
              force: bool, ignored: Set | None, other_for: OtherVersions | None = None) -> tuple[Any, Managed]:
    """merge.Updater.Apply: the merged object and the ownership (``managed`` is not mutated); raises
    :class:`Conflicts` and :class:`typed.TypedError`."""
    out = managed.copy()
    merged = typed.merge(live, config, atom)
    last = out.fields.get(mid)
    applied = typed.to_field_set(config, atom)
    if ignored:
        applied = typed.recursive_difference(applied, ignored)
    out.fields[mid] = VersionedSet(applied, api_version, True)
    out.entries.pop(mid, None)
    merged = _prune(merged, out, last, atom)
    cmp = typed.compare(live, merged, atom).excluding(ignored)
    _others_lose(out, mid, cmp, force, api_version, other_for(live, merged) if other_for is not None else None)
    if out.fields[mid].set.empty():
        del out.fields[mid]
    return merged, out


def raw_update(managed: Managed, live: Any, new: Any, atom: typed.Atom, *, mid: ManagerId, api_version: str,
               ignored: Set | None) -> Managed:
    """merge.Updater.Update: the writer owns what it changed, others lose it (``managed`` is not mutated)."""
    cmp = typed.compare(live, new, atom).excluding(ignored)
    out = managed.copy()
    _others_lose(out, mid, cmp, True)
    previous = out.fields.get(mid)
    owned = cmp.changed() if previous is None else previous.set.difference(cmp.removed).union(cmp.changed())
    if owned.empty():
        out.fields.pop(mid, None)
    else:
        out.fields[mid] = VersionedSet(owned, api_version, False)
        out.entries.pop(mid, None)
    return out


def apply(managed: Managed, live: Any, config: Any, atom: typed.Atom, *, manager: str, api_version: str,
          subresource: str, force: bool, ignored: Set | None, now: str, empty: Any,
          other_for: OtherVersions | None = None) -> tuple[Any, Managed]:
    """The object after applying ``config`` (None when nothing changed) and the new ownership.
    ``empty`` is the kind's zero object (what ``before-first-apply`` is measured from). Raises
    :class:`Conflicts` and :class:`typed.TypedError`."""
    live = without_managed_fields(live)
    if not managed.fields:
        # The fields an object got before anyone applied belong to "before-first-apply".
        managed = update(managed, empty, live, atom, manager=BEFORE_FIRST_APPLY, api_version=api_version,
                         subresource=subresource, ignored=ignored, now=now)
    mid = ManagerId(manager, APPLY, "", subresource)
    merged, out = raw_apply(managed, live, config, atom, mid=mid, api_version=api_version, force=force,
                            ignored=ignored, other_for=other_for)
    vs = out.fields.get(mid)
    if vs is not None:
        owned = vs.set.difference(STRIPPED)
        if owned.empty():
            del out.fields[mid]
        else:
            out.fields[mid] = VersionedSet(owned, api_version, True)
    if typed.equal(merged, live):
        return None, out
    out.times[mid] = now
    return merged, out


def _prune(merged: Any, managed: Managed, last: VersionedSet | None, atom: typed.Atom) -> Any:
    """Remove what the applier owned last time and no longer applies, unless another manager owns it
    (Updater.prune with addBackOwnedItems and addBackDanglingItems)."""
    if last is None or last.set.empty():
        return merged

    def named(s: Set) -> Set:
        return typed.ensure_named_fields(s, atom)

    last_set = named(last.set)
    pruned = typed.remove_items(merged, last_set, atom)
    owned = EMPTY
    for vs in managed.fields.values():
        owned = owned.union(vs.set)
    merged_set = named(typed.to_field_set(merged, atom))
    pruned_set = named(typed.to_field_set(pruned, atom))
    pruned = typed.remove_items(merged, merged_set.difference(pruned_set.union(named(owned))), atom)
    pruned_set = named(typed.to_field_set(pruned, atom))
    return typed.remove_items(merged, merged_set.difference(pruned_set).intersection(last_set), atom)
