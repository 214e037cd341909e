"""Controller references: which controller owns an object, and adopting/releasing objects by selector.

Ports ``pkg/controller/controller_ref_manager.go`` for any kind (pods, ReplicaSets,
ControllerRevisions, ...) through the :class:`Resource` descriptor.

Guarantees of :meth:`ControllerRefManager.claim` (upstream's ``ClaimObject`` over a list):
- owned by us (controller ref UID = owner UID) and matching  -> kept;
- owned by us and no longer matching -> released (unless the owner is being deleted), not kept;
- owned by another controller -> ignored;
- an orphan that matches, lives in the owner's namespace, is not being deleted, while the owner is
  not being deleted -> adopted, but only after ``can_adopt`` (a *live* re-read of the owner, see
  :func:`live_owner_check`) agreed. ``can_adopt`` runs at most once per manager, so make one manager
  per sync, as upstream does; its refusal is remembered for the rest of the pass.
- Adoption is a strategic-merge patch adding our controller ownerReference and carrying the object's
  UID (so a recreated namesake is never adopted by mistake); release is a strategic-merge patch
  deleting our ownerReference by UID, with the same UID precondition. NotFound on adopt or release,
  and Invalid on release (the object was replaced or lost its refs), mean "not ours any more".
- Every candidate is processed even if some fail; the failures are raised together afterwards as a
  :class:`ClaimError` (upstream's aggregate error).
- Input objects (cache objects) are never mutated; the claimed list holds the objects as given, or
  the patched object the API server returned for adopted ones.

:func:`resolve_controller_ref` is the ``resolveControllerRef`` every workload controller has: the cached owner
a controller reference names, only if its kind and UID match (a recreated namesake is not the owner).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog

from controller_manager.api.meta import controller_ref, is_being_deleted, meta
from controller_manager.api.resources import Resource
from controller_manager.api.selectors import Selector
from controller_manager.client import ApiClient
from controller_manager.client.errors import Invalid, NotFound

__all__ = [
    "CanAdopt",
    "ClaimError",
    "ControllerRefManager",
    "delete_owner_ref_patch",
    "live_owner_check",
    "new_controller_ref",
    "owner_ref_controller_patch",
    "recheck_deletion_timestamp",
    "resolve_controller_ref",
    "validate_controller_ref",
]

Obj = Mapping[str, Any]
CanAdopt = Callable[[], Awaitable[None]]

_log = structlog.get_logger("controller_manager.controller_ref")


class ClaimError(Exception):
    """Some adoptions or releases of a claim pass failed; ``errors`` holds each failure and
    ``claimed`` what the pass did claim (upstream returns both)."""

    def __init__(self, errors: Sequence[BaseException], claimed: Sequence[Obj] = ()) -> None:
        self.errors = list(errors)
        self.claimed = list(claimed)
        # utilerrors.NewAggregate: one error reads as itself, several as "[a, b]".
        text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
        super().__init__(text)


def new_controller_ref(owner: Obj, resource: Resource | None = None) -> dict[str, Any]:
    """``metav1.NewControllerRef``: the ownerReference naming ``owner`` as controller.

    ``resource`` supplies apiVersion and kind (list items from the API carry neither); without it
    the owner's own ``apiVersion``/``kind`` are used.
    """
    m = meta(owner)
    return {
        "apiVersion": resource.api_version if resource else owner.get("apiVersion", ""),
        "kind": resource.kind if resource else owner.get("kind", ""),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def resolve_controller_ref(get: Callable[[str], Obj | None], resource: Resource, namespace: str | None,
                           ref: Mapping[str, Any]) -> Obj | None:
    """The object ``get`` (a cache lookup by ``namespace/name``) returns for controller reference ``ref``, if
    ``ref`` is of ``resource``'s kind and the object still has the referenced UID; else None."""
    if ref.get("kind") != resource.kind:
        return None
    owner = get(f"{namespace}/{ref.get('name')}")
    if owner is None or meta(owner).get("uid") != ref.get("uid"):
        return None
    return owner


def validate_controller_ref(ref: Mapping[str, Any] | None) -> None:
    """Raise ValueError, with upstream's words, unless ``ref`` is a complete controller reference."""
    if ref is None:
        raise ValueError("controllerRef is nil")
    if not ref.get("apiVersion"):
        raise ValueError("controllerRef has empty APIVersion")
    if not ref.get("kind"):
        raise ValueError("controllerRef has empty Kind")
    if ref.get("controller") is not True:
        raise ValueError("controllerRef.Controller is not set to true")
    if ref.get("blockOwnerDeletion") is not True:
        raise ValueError("controllerRef.BlockOwnerDeletion is not set")


def owner_ref_controller_patch(ref: Mapping[str, Any], uid: str, finalizers: Sequence[str] = ()) -> dict[str, Any]:
    """Strategic-merge patch adopting an object: add ``ref``, precondition on the object's ``uid``."""
    metadata: dict[str, Any] = {"ownerReferences": [dict(ref)], "uid": uid}
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {"metadata": metadata}


def delete_owner_ref_patch(dependent_uid: str, owner_uids: Iterable[str], finalizers: Sequence[str] = ()
                           ) -> dict[str, Any]:
    """Strategic-merge patch releasing an object (``GenerateDeleteOwnerRefStrategicMergeBytes``)."""
    metadata: dict[str, Any] = {
        "uid": dependent_uid,
        "ownerReferences": [{"$patch": "delete", "uid": uid} for uid in owner_uids],
    }
    if finalizers:
        metadata["$deleteFromPrimitiveList/finalizers"] = list(finalizers)
    return {"metadata": metadata}


def recheck_deletion_timestamp(get_object: Callable[[], Awaitable[Obj]]) -> CanAdopt:
    """A ``can_adopt`` that fails if a fresh read of the owner fails or shows a deletionTimestamp."""

    async def check() -> None:
        try:
            obj = await get_object()
        except Exception as err:
            raise RuntimeError(f"can't recheck DeletionTimestamp: {err}") from err
        m = meta(obj)
        if m.get("deletionTimestamp") is not None:
            raise RuntimeError(
                f"{m.get('namespace', '')}/{m.get('name', '')} has just been deleted at {m['deletionTimestamp']}")

    return check


def live_owner_check(client: ApiClient, resource: Resource, owner: Obj) -> CanAdopt:
    """``can_adopt`` for ``owner``: re-read it from the API (not the cache); refuse if it was
    replaced (another UID) or is being deleted. Upstream controllers each inline this."""
    m = meta(owner)
    namespace, name, uid = m.get("namespace"), str(m.get("name", "")), m.get("uid")

    async def fresh() -> Obj:
        obj = await client.get(resource, name, namespace)
        fresh_uid = meta(obj).get("uid")
        if fresh_uid != uid:
            raise RuntimeError(f"original {resource.kind} {namespace}/{name} is gone: got uid {fresh_uid}, "
                               f"wanted {uid}")
        return obj

    return recheck_deletion_timestamp(fresh)


class ControllerRefManager:
    """Claims objects of ``resource`` for ``owner`` by ``selector`` (one instance per sync)."""

    def __init__(
        self,
        client: ApiClient,
        owner: Obj,
        owner_resource: Resource,
        selector: Selector,
        resource: Resource,
        can_adopt: CanAdopt | None,
        finalizers: Sequence[str] = (),
    ) -> None:
        self._client = client
        self.owner = owner
        self._owner_meta = meta(owner)
        self._owner_uid = str(self._owner_meta.get("uid", ""))
        self._owner_ref = new_controller_ref(owner, owner_resource)
        self.selector = selector
        self.resource = resource
        self._can_adopt = can_adopt
        self._can_adopt_result: BaseException | None = None
        self._can_adopt_done = False
        # Finalizers added on adoption and removed on release (the Job controller's tracking finalizer).
        self._finalizers = tuple(finalizers)

    async def can_adopt(self) -> None:
        """Run the live check once; later calls repeat its verdict without another API read."""
        if not self._can_adopt_done:
            self._can_adopt_done = True
            if self._can_adopt is not None:
                try:
                    await self._can_adopt()
                except Exception as err:
                    self._can_adopt_result = err
        if self._can_adopt_result is not None:
            raise self._can_adopt_result

    async def claim(self, objects: Iterable[Obj], filters: Sequence[Callable[[Obj], bool]] = ()) -> list[Obj]:
        """The objects this owner should manage, adopting and releasing on the way.

        ``filters`` further restrict what matches (after the selector), as ``ClaimPods``' filters.
        Raises :class:`ClaimError` after the pass if any adoption or release failed.
        """

        def match(obj: Obj) -> bool:
            labels = meta(obj).get("labels")
            if not self.selector.matches(labels if type(labels) is dict or isinstance(labels, Mapping) else None):
                return False
            return not filters or all(f(obj) for f in filters)

        claimed: list[Obj] = []
        errors: list[BaseException] = []
        owner_uid = self._owner_uid
        for obj in objects:
            # The common case, decided without a coroutine per object: ours and still selected -> kept.
            ref = controller_ref(obj)
            if ref is not None and ref.get("uid") == owner_uid and match(obj):
                claimed.append(obj)
                continue
            try:
                kept = await self._claim_object(obj, match)
            except Exception as err:
                errors.append(err)
                continue
            if kept is not None:
                claimed.append(kept)
        if errors:
            raise ClaimError(errors, claimed)
        return claimed

    async def _claim_object(self, obj: Obj, match: Callable[[Obj], bool]) -> Obj | None:
        owner_deleting = is_being_deleted(self.owner)
        ref = controller_ref(obj)
        if ref is not None:
            if ref.get("uid") != self._owner_uid:
                return None  # someone else's
            if match(obj):
                return obj
            # Ours but no longer selected: let it go, unless we are going away anyway.
            if owner_deleting:
                return None
            try:
                await self.release(obj)
            except NotFound:
                pass
            return None

        # An orphan.
        if owner_deleting or not match(obj) or is_being_deleted(obj):
            return None
        owner_ns = self._owner_meta.get("namespace")
        if owner_ns and owner_ns != meta(obj).get("namespace"):
            return None
        try:
            return await self.adopt(obj)
        except NotFound:
            return None

    async def adopt(self, obj: Obj) -> Obj:
        """Make ``owner`` the controller of ``obj`` (after the live check); returns the patched object."""
        m = meta(obj)
        try:
            await self.can_adopt()
        except Exception as err:
            raise RuntimeError(f"can't adopt {self.resource.kind} {m.get('namespace', '')}/{m.get('name', '')} "
                               f"({m.get('uid', '')}): {err}") from err
        patch = owner_ref_controller_patch(self._owner_ref, str(m.get("uid", "")), self._finalizers)
        adopted = await self._client.patch(self.resource, str(m.get("name", "")), patch, m.get("namespace"),
                                           patch_type="strategic")
        _log.info("adopted", kind=self.resource.kind, object=f"{m.get('namespace', '')}/{m.get('name', '')}",
                  owner=self._owner_meta.get("name"))
        return adopted

    async def release(self, obj: Obj) -> None:
        """Remove ``owner``'s ownerReference from ``obj``; gone or replaced objects count as released."""
        m = meta(obj)
        _log.info("releasing", kind=self.resource.kind, object=f"{m.get('namespace', '')}/{m.get('name', '')}",
                  owner=self._owner_meta.get("name"))
        patch = delete_owner_ref_patch(str(m.get("uid", "")), [self._owner_uid], self._finalizers)
        try:
            await self._client.patch(self.resource, str(m.get("name", "")), patch, m.get("namespace"),
                                     patch_type="strategic")
        except (NotFound, Invalid):
            # Invalid: the object has no such ref any more or its UID differs (deleted and recreated).
            pass
