"""A StatefulSet's history: ControllerRevisions holding each pod template it had (``pkg/controller/history``
and the revision half of ``stateful_set_utils.go``).

Guarantees:
- A revision's ``data`` is the strategic-merge patch ``{"spec": {"template": {..., "$patch": "replace"}}}``
  restoring the set's template; :func:`apply_revision` restores it onto a copy of the set. Two revisions are
  equal when their data are equal (``EqualRevision``).
- :func:`new_revision` names a revision ``<set>-<hash>`` (the prefix cut to 223 characters), the hash taken over
  the data and the collision count; it is labelled with the template's labels plus ``controller-revision-hash:
  <hash>``, annotated with the set's annotations, and controlled by the set.
- :meth:`History.create` retries on a name clash with different data by bumping the collision count it was
  given (the caller writes it to ``status.collisionCount``); the same data under that name is the revision.
- Revisions sort by number, then creation time, then name (``SortControllerRevisions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from controller_manager.api.meta import controller_ref, deep_copy, meta
from controller_manager.api.resources import CONTROLLERREVISIONS, STATEFULSETS
from controller_manager.api.selectors import Selector
from controller_manager.client import ApiClient
from controller_manager.client.errors import AlreadyExists, Conflict
from controller_manager.controllerutil.controller_ref import CanAdopt, ControllerRefManager, new_controller_ref
from controller_manager.controllerutil.controller_utils import compute_hash
from controller_manager.controllerutil.sharding import inherit_shard_labels
from controller_manager.runtime.informers import NAMESPACE_INDEX, SharedInformer

from .util import REVISION_LABEL

__all__ = [
    "DEFAULT_REVISION_HISTORY_LIMIT",
    "History",
    "apply_revision",
    "equal_revision",
    "get_patch",
    "new_revision",
    "next_revision",
    "revision_name",
    "revision_number",
    "sort_revisions",
]

Obj = Mapping[str, Any]

DEFAULT_REVISION_HISTORY_LIMIT = 10
_MAX_PREFIX = 223  # 253 - 1 - the longest hash
_UPDATE_RETRIES = 5


def get_patch(sts: Obj) -> dict[str, Any]:
    """``getPatch``: the revision data for the set's current template."""
    template = deep_copy(dict((sts.get("spec") or {}).get("template") or {}))
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def _canonical(data: Any) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def revision_name(prefix: str, hash_: str) -> str:
    return f"{prefix[:_MAX_PREFIX]}-{hash_}"


def revision_number(revision: Obj) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) else 0


def _hash(data: Any, collision_count: int | None) -> str:
    return compute_hash(data, collision_count)


def new_revision(sts: Obj, number: int, collision_count: int | None) -> dict[str, Any]:
    """``newRevision``: an unsaved ControllerRevision of the set's template."""
    data = get_patch(sts)
    hash_ = _hash(data, collision_count)
    m = meta(sts)
    template_labels = meta((sts.get("spec") or {}).get("template") or {}).get("labels") or {}
    metadata: dict[str, Any] = {
        "name": revision_name(str(m.get("name") or ""), hash_),
        "namespace": m.get("namespace"),
        "labels": inherit_shard_labels(sts, {**template_labels, REVISION_LABEL: hash_}),
        "ownerReferences": [new_controller_ref(sts, STATEFULSETS)],
    }
    if m.get("annotations"):
        metadata["annotations"] = dict(m["annotations"])
    return {"apiVersion": CONTROLLERREVISIONS.api_version, "kind": CONTROLLERREVISIONS.kind,
            "metadata": metadata, "data": data, "revision": number}


def equal_revision(lhs: Obj | None, rhs: Obj | None) -> bool:
    if lhs is None or rhs is None:
        return lhs is rhs
    return _canonical(lhs.get("data")) == _canonical(rhs.get("data"))


def apply_revision(sts: Obj, revision: Obj) -> dict[str, Any]:
    """``ApplyRevision``: a copy of the set with the revision's template restored."""
    template = dict((((revision.get("data") or {}).get("spec") or {}).get("template")) or {})
    template.pop("$patch", None)
    return {**sts, "spec": {**(sts.get("spec") or {}), "template": template}}


def sort_revisions(revisions: Sequence[Obj]) -> list[Obj]:
    return sorted(revisions, key=lambda r: (revision_number(r), str(meta(r).get("creationTimestamp") or ""),
                                            str(meta(r).get("name") or "")))


def next_revision(revisions: Sequence[Obj]) -> int:
    """One past the last (sorted) revision's number; 1 when there is none."""
    return revision_number(revisions[-1]) + 1 if revisions else 1


def history_limit(sts: Obj) -> int:
    value = (sts.get("spec") or {}).get("revisionHistoryLimit")
    return value if isinstance(value, int) else DEFAULT_REVISION_HISTORY_LIMIT


class History:
    """Reads (from the cache) and writes (through the API) one controller's ControllerRevisions."""

    def __init__(self, client: ApiClient, revisions: SharedInformer) -> None:
        self._client = client
        self._revisions = revisions

    def list(self, sts: Obj, selector: Selector) -> list[Obj]:
        """``ListControllerRevisions``: the namespace's revisions the selector matches, ours or orphans."""
        uid = meta(sts).get("uid")
        found: list[Obj] = []
        for revision in self._revisions.store.by_index(NAMESPACE_INDEX, str(meta(sts).get("namespace") or "")):
            if not selector.matches(meta(revision).get("labels") or {}):
                continue
            ref = controller_ref(revision)
            if ref is None or ref.get("uid") == uid:
                found.append(revision)
        return found

    async def adopt_orphans(self, sts: Obj, selector: Selector, revisions: Sequence[Obj],
                            can_adopt: CanAdopt) -> None:
        """``adoptOrphanRevisions``: after one live check, make the set the controller of each orphan."""
        orphans = [r for r in revisions if controller_ref(r) is None]
        if not orphans:
            return
        manager = ControllerRefManager(self._client, sts, STATEFULSETS, selector, CONTROLLERREVISIONS, can_adopt)
        try:
            await manager.can_adopt()
        except Exception as err:
            raise RuntimeError(f"can't adopt ControllerRevisions: {err}") from err
        for revision in orphans:
            await manager.adopt(revision)

    async def create(self, sts: Obj, revision: Obj, collision_count: int) -> tuple[Obj, int]:
        """``CreateControllerRevision``: (the stored revision, the collision count that named it)."""
        prefix = str(meta(sts).get("name") or "")
        namespace = str(meta(sts).get("namespace") or "")
        while True:
            name = revision_name(prefix, _hash(revision.get("data"), collision_count))
            clone = {**revision, "metadata": {**meta(revision), "name": name}}
            try:
                return await self._client.create(CONTROLLERREVISIONS, clone, namespace), collision_count
            except AlreadyExists:
                existing = await self._client.get(CONTROLLERREVISIONS, name, namespace)
                if equal_revision(existing, clone):
                    return existing, collision_count
                collision_count += 1

    async def update_number(self, revision: Obj, number: int) -> Obj:
        """``UpdateControllerRevision``: give the revision a new number, re-reading it on conflicts."""
        current = revision
        for attempt in range(_UPDATE_RETRIES):
            if revision_number(current) == number:
                return current
            try:
                return await self._client.update(CONTROLLERREVISIONS, {**current, "revision": number})
            except Conflict:
                if attempt == _UPDATE_RETRIES - 1:
                    raise
                current = await self._client.get(CONTROLLERREVISIONS, str(meta(revision).get("name")),
                                                 meta(revision).get("namespace"))
        return current

    async def delete(self, revision: Obj) -> None:
        await self._client.delete(CONTROLLERREVISIONS, str(meta(revision).get("name")),
                                  meta(revision).get("namespace"))
