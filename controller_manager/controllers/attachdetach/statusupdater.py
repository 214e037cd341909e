"""``node.status.volumesAttached`` from the actual state of the world
(``pkg/controller/volume/attachdetach/statusupdater``).

Guarantees:
- For each node whose report changed, the Node's ``status.volumesAttached`` becomes exactly the volumes the
  actual state reports as attached there (sorted by name, ``devicePath`` ""), by a strategic-merge patch of the
  ``status`` subresource computed against the Node as last seen (as ``PatchNodeStatus``: a uid precondition;
  the list is atomic, so it is sent whole, or ``null`` for none left). "Last seen" is the newer
  of the cached Node and the Node the previous patch returned, so a cache that lags behind the controller's own
  writes never hides a change. Nothing is sent when that Node already shows the list.
- A node missing from the cache (or deleted meanwhile) is skipped until it appears; any other failure marks the
  node for another update and is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.resources import NODES
from controller_manager.client.errors import ApiError
from controller_manager.controllers.attachdetach.cache import ActualStateOfWorld

__all__ = ["NodeStatusUpdater", "volumes_attached_patch"]


def volumes_attached_patch(node: Mapping[str, Any], attached: Sequence[Mapping[str, str]]) -> dict[str, Any] | None:
    """The two-way strategic merge patch from the node's ``volumesAttached`` to ``attached`` (an atomic list:
    replaced whole, ``null`` when empty) with the uid precondition; None if they are equal."""
    old = list((node.get("status") or {}).get("volumesAttached") or ())
    new = [dict(v) for v in attached]
    if old == new:
        return None
    return {"metadata": {"uid": meta(node).get("uid")}, "status": {"volumesAttached": new or None}}


class NodeStatusUpdater:
    def __init__(self, client: Any, nodes: Any, asw: ActualStateOfWorld, log: Any) -> None:
        self._client = client
        self._nodes = nodes  # the Node informer's store
        self._asw = asw
        self._log = log
        self._written: dict[str, Mapping[str, Any]] = {}  # node name -> the Node our last patch returned

    def _last_seen(self, node_name: str) -> Mapping[str, Any] | None:
        cached = self._nodes.get(node_name)
        written = self._written.get(node_name)
        if cached is None or written is None:
            if cached is None:
                self._written.pop(node_name, None)
            return cached  # type: ignore[no-any-return]
        if meta(written).get("uid") != meta(cached).get("uid") or _rv(cached) >= _rv(written):
            del self._written[node_name]
            return cached  # type: ignore[no-any-return]
        return written

    async def update_node_statuses(self) -> list[Exception]:
        errors: list[Exception] = []
        for node_name, attached in self._asw.volumes_to_report_attached().items():
            err = await self._process(node_name, attached)
            if err is not None:
                errors.append(err)
        return errors

    async def update_node_status_for_node(self, node_name: str) -> Exception | None:
        needed, attached = self._asw.volumes_to_report_attached_for_node(node_name)
        if not needed:
            return None
        return await self._process(node_name, attached)

    async def _process(self, node_name: str, attached: list[dict[str, str]]) -> Exception | None:
        node = self._last_seen(node_name)
        if node is None:
            self._log.debug("Could not update node status. Failed to find node in NodeInformer cache",
                            node=node_name)
            return None
        patch = volumes_attached_patch(node, attached)
        if patch is None:
            return None
        try:
            self._written[node_name] = await self._client.patch(NODES, node_name, patch, patch_type="strategic",
                                                                subresource="status")
        except ApiError as err:
            if err.status == 404:
                self._log.debug("Could not update node status for; re-marking for update", node=node_name)
                return None
            self._asw.set_node_status_update_needed(node_name)
            return err
        self._log.debug("Updating status for node succeeded", node=node_name, attachedVolumes=attached)
        return None


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int(meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0
