"""The collector's API calls: read, delete, patch an object named by its graph identity.

Guarantees (upstream ``operations.go`` and ``patch.go``):
- Every call maps the identity's apiVersion/kind through the REST mapper first; an unmapped kind raises
  :class:`RestMappingError` before any request.
- ``delete_object`` always carries a UID precondition (and the resourceVersion the decision was made on, when
  known). If that resourceVersion is stale but the live object's ownerReferences are unchanged, the delete is
  retried once with the UID precondition alone; if the object is gone meanwhile, that is success.
- ``patch`` tries a strategic-merge patch and falls back to a JSON merge patch (carrying resourceVersion)
  only when the server answers 415 (custom resources do not take strategic merge).
- ``read_owner``: concurrent reads of one owner share one request (the workers deleting a Job's pods all read
  that Job at once). A shared answer is at most one request older than a fresh one: an absent owner stays absent
  (uids are never reused), and an owner read as present that has just gone re-queues its dependents when its
  delete event reaches the graph, so what the collector decides does not change.
- ``remove_finalizer`` re-reads the object and merge-patches its finalizers with its resourceVersion, retrying
  conflicts on client-go's ``retry.DefaultBackoff`` (4 tries, 10 ms x5 each, jittered); a missing object or
  finalizer is success.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.resources import Resource
from controller_manager.client import ApiClient
from controller_manager.client.errors import Conflict, NotFound, UnsupportedMediaType
from controller_manager.clock import Clock

from .discovery import RestMapper
from .errors import NamespacedOwnerOfClusterScopedObject, RestMappingError
from .graph import Node, ObjectReference
from .graph_builder import GraphBuilder

Obj = dict[str, Any]

# client-go's retry.DefaultBackoff
RETRY_STEPS = 4
RETRY_DURATION = 0.010
RETRY_FACTOR = 5.0
RETRY_JITTER = 0.1


class Operations:
    def __init__(self, client: ApiClient, mapper: RestMapper, builder: GraphBuilder, clock: Clock,
                 log: Any) -> None:
        self.client = client
        self.mapper = mapper
        self.builder = builder
        self.clock = clock
        self.log = log
        self._owner_reads: dict[tuple[str, str, str, str], asyncio.Future[Obj]] = {}

    def api_resource(self, api_version: str, kind: str) -> Resource:
        res = self.mapper.resource_for(api_version, kind)
        if res is None:
            raise RestMappingError(kind, api_version)
        return res

    def _target(self, item: ObjectReference) -> tuple[Resource, str | None]:
        res = self.api_resource(item.api_version, item.kind)
        return res, (item.namespace or None) if res.namespaced else None

    async def get_object(self, item: ObjectReference) -> Obj:
        res, namespace = self._target(item)
        if res.namespaced and not namespace:
            # A namespaced kind without a namespace: only a cluster-scoped dependent names an owner this way.
            raise NamespacedOwnerOfClusterScopedObject()
        return await self.client.get(res, item.name, namespace, metadata_only=True)

    async def read_owner(self, res: Resource, name: str, namespace: str | None) -> Obj:
        """GET an owner; a read of the same object already in flight is shared instead of sent again."""
        key = (res.group, res.plural, namespace or "", name)
        read = self._owner_reads.get(key)
        if read is None:
            read = asyncio.ensure_future(self.client.get(res, name, namespace, metadata_only=True))
            self._owner_reads[key] = read
            read.add_done_callback(lambda done: self._read_done(key, done))
        # Shielded: a caller cancelled mid-read must not cancel the read the others wait on.
        return await asyncio.shield(read)

    def _read_done(self, key: tuple[str, str, str, str], read: asyncio.Future[Obj]) -> None:
        if self._owner_reads.get(key) is read:
            del self._owner_reads[key]
        if not read.cancelled():
            read.exception()  # retrieved: callers that were cancelled meanwhile cannot

    async def delete_object(self, item: ObjectReference, resource_version: str,
                            owners_at_version: Sequence[Mapping[str, Any]], policy: str) -> None:
        res, namespace = self._target(item)
        try:
            await self.client.delete(res, item.name, namespace, propagation_policy=policy, uid=item.uid,
                                     resource_version=resource_version or None)
            return
        except Conflict as err:
            if not resource_version:
                raise
            conflict = err
        try:
            live = await self.client.get(res, item.name, namespace, metadata_only=True)
        except NotFound:
            return  # the object we wanted gone is gone
        m = meta(live)
        if (m.get("uid") == item.uid and m.get("resourceVersion") != resource_version
                and list(m.get("ownerReferences") or ()) == list(owners_at_version)):
            # It changed, but not in what made us delete it: delete it anyway, still only that instance.
            await self.client.delete(res, item.name, namespace, propagation_policy=policy, uid=item.uid)
            return
        raise conflict

    async def patch_object(self, item: ObjectReference, patch: Mapping[str, Any], patch_type: str) -> Obj:
        res, namespace = self._target(item)
        return await self.client.patch(res, item.name, dict(patch), namespace, patch_type=patch_type)

    async def patch(self, item: Node, smp: Mapping[str, Any],
                    jmp: Callable[[Node], Awaitable[Mapping[str, Any]]]) -> Obj:
        try:
            return await self.patch_object(item.identity, smp, "strategic")
        except UnsupportedMediaType:
            pass
        return await self.patch_object(item.identity, await jmp(item), "merge")

    async def get_metadata(self, item: ObjectReference) -> Mapping[str, Any]:
        """The object's metadata from the monitor's cache if it has it, else from the API."""
        res, namespace = self._target(item)
        cached = self.builder.cached_metadata(res, namespace or "", item.name)
        if cached is not None:
            return meta(cached)
        return meta(await self.client.get(res, item.name, namespace, metadata_only=True))

    async def delete_owner_ref_merge_patch(self, item: Node, owner_uids: Sequence[str]) -> Mapping[str, Any]:
        m = await self.get_metadata(item.identity)
        refs = [ref for ref in m.get("ownerReferences") or () if ref.get("uid") not in owner_uids]
        return {"metadata": {"resourceVersion": m.get("resourceVersion", ""), "ownerReferences": refs or None}}

    async def unblock_owner_refs_merge_patch(self, item: Node) -> Mapping[str, Any]:
        m = await self.get_metadata(item.identity)
        refs = [{**ref, "blockOwnerDeletion": False} for ref in item.owners]
        return {"metadata": {"resourceVersion": m.get("resourceVersion", ""), "ownerReferences": refs or None}}

    async def remove_finalizer(self, owner: Node, finalizer: str) -> None:
        delay = RETRY_DURATION
        for attempt in range(RETRY_STEPS):
            try:
                await self._remove_finalizer_once(owner, finalizer)
                return
            except Conflict:
                if attempt == RETRY_STEPS - 1:
                    raise RuntimeError(f"updateMaxRetries({RETRY_STEPS}) has reached. The garbage collector will "
                                       f"retry later for owner {owner.identity}") from None
            await self.clock.sleep(delay * (1.0 + RETRY_JITTER * random.random()))
            delay *= RETRY_FACTOR

    async def _remove_finalizer_once(self, owner: Node, finalizer: str) -> None:
        try:
            obj = await self.get_object(owner.identity)
        except NotFound:
            return
        except RestMappingError:
            raise
        except Exception as err:
            raise RuntimeError(f"cannot finalize owner {owner.identity}, because cannot get it: {err}. "
                               "The garbage collector will retry later") from err
        m = meta(obj)
        finalizers = list(m.get("finalizers") or ())
        if finalizer not in finalizers:
            self.log.debug("finalizer already removed from object", finalizer=finalizer, object=str(owner.identity))
            return
        remaining = [f for f in finalizers if f != finalizer]
        patch = {"metadata": {"resourceVersion": m.get("resourceVersion", ""), "finalizers": remaining or None}}
        await self.patch_object(owner.identity, patch, "merge")


def unblock_owner_refs_strategic_patch(item: Node) -> dict[str, Any]:
    """Sets ``blockOwnerDeletion: false`` on each of ``item``'s blocking ownerReferences (merged by uid)."""
    refs = [{**ref, "blockOwnerDeletion": False} for ref in item.owners if ref.get("blockOwnerDeletion") is True]
    return {"metadata": {"ownerReferences": refs, "uid": item.identity.uid}}
