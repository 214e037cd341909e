"""The node IPAM controller: gives every Node its pod CIDRs out of ``--cluster-cidr`` (kube-controller-manager's
``node-ipam-controller`` with the ``RangeAllocator``, ``pkg/controller/nodeipam``).

Guarantees:
- Off unless ``--allocate-node-cidrs`` (upstream does not start it then): no informer, no worker, no request.
  When on, the flags are checked at start-up as upstream (:mod:`.config`); a bad combination stops the manager
  with upstream's message.
- Every Node the informer shows with ``spec.podCIDRs`` has them occupied the moment it is seen, so the initial
  list occupies all existing allocations before any worker runs (upstream lists Nodes before starting); an
  allocation that does not fit the configuration is logged.
- A Node without podCIDRs gets one CIDR per cluster CIDR (dual-stack: in ``--cluster-cidr`` order), the
  lowest free one after the last handed out, never one taken or in the service ranges, by a strategic-merge
  patch of ``spec.podCIDR`` (the first) and ``spec.podCIDRs``; tried 3 times. If the cached Node meanwhile has
  podCIDRs, the reserved ones are given back. A failed patch records the ``CIDRAssignmentFailed`` event and gives
  the CIDRs back (unless the server timed out: the write may have landed) and the Node is retried with backoff.
- An exhausted range records ``CIDRNotAvailable`` (Normal, "Node <name> status is now: CIDRNotAvailable",
  component ``cidrAllocator``) on the Node and retries it with backoff, so it gets a CIDR once one is freed.
- A deleted Node, or one being deleted, gives its podCIDRs back.
- Work queue ``cidrallocator_node``, 30 workers (upstream's fixed count).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import key_of, meta
from controller_manager.api.resources import NODES
from controller_manager.client.errors import ApiError
from controller_manager.controllers.nodeipam.allocator import AllocationError, RangeAllocator, node_pod_cidrs
from controller_manager.controllers.nodeipam.cidrset import Network
from controller_manager.controllers.nodeipam.config import read_config
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

__all__ = ["CIDR_ASSIGNMENT_FAILED", "CIDR_NOT_AVAILABLE", "EVENT_COMPONENT", "NodeIpamController",
           "pod_cidrs_patch"]

Obj = Mapping[str, Any]

EVENT_COMPONENT = "cidrAllocator"
CIDR_NOT_AVAILABLE = "CIDRNotAvailable"
CIDR_ASSIGNMENT_FAILED = "CIDRAssignmentFailed"
CIDR_UPDATE_RETRIES = 3


def pod_cidrs_patch(cidrs: list[str]) -> dict[str, Any]:
    """``PatchNodeCIDRs``: the first CIDR into the old ``podCIDR`` field, the list into ``podCIDRs``."""
    return {"spec": {"podCIDR": cidrs[0], "podCIDRs": list(cidrs)}}


class NodeIpamController(Controller):
    """Nodes -> their pod CIDRs. Its queue holds Node names."""

    name: ClassVar[str] = "node-ipam-controller"
    alias: ClassVar[str] = "nodeipam"
    queue_name: ClassVar[str | None] = "cidrallocator_node"
    default_workers: ClassVar[int] = 30

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.enabled = bool(ctx.options.get("allocate_node_cidrs", False))
        self.allocator: RangeAllocator | None = None
        if not self.enabled:
            return
        self.allocator = RangeAllocator(read_config(ctx.options, self.log), self.log)
        self.recorder = ctx.events.recorder(EVENT_COMPONENT)
        self.node_informer = ctx.informers.informer(NODES)
        self.node_informer.add_handler(self._on_node)

    def workers(self) -> int:
        return super().workers() if self.enabled else 0

    # --- event handlers (synchronous) -------------------------------------------------------------

    def _on_node(self, event: Event) -> None:
        if isinstance(event, Deleted):
            self._release(event.obj)
            return
        node = event.new if isinstance(event, Updated) else event.obj
        if isinstance(event, Added):
            self._occupy(node)
        self.queue.add(key_of(node))

    def _occupy(self, node: Obj) -> None:
        assert self.allocator is not None
        cidrs = node_pod_cidrs(node)
        if not cidrs:
            return
        try:
            self.allocator.occupy(str(meta(node).get("name") or ""), cidrs)
        except AllocationError as err:
            self.log.error("failed to occupy the node's CIDRs", node=key_of(node), error=str(err))

    def _release(self, node: Obj) -> None:
        assert self.allocator is not None
        cidrs = node_pod_cidrs(node)
        if not cidrs:
            return
        try:
            self.allocator.release(str(meta(node).get("name") or ""), cidrs)
        except AllocationError as err:
            self.log.error("error while processing CIDR Release", node=key_of(node), error=str(err))

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        assert self.allocator is not None
        node = self.node_informer.store.get(key)
        if node is None:
            return None  # released by the delete handler
        name = str(meta(node).get("name") or "")
        if meta(node).get("deletionTimestamp"):
            self.log.debug("node is being deleted", node=name)
            self.allocator.release(name, node_pod_cidrs(node))
            return None
        cidrs = node_pod_cidrs(node)
        if cidrs:
            self.allocator.occupy(name, cidrs)
            return None
        try:
            reserved = self.allocator.reserve()
        except AllocationError:
            self._record(node, CIDR_NOT_AVAILABLE)
            raise
        await self._update_allocation(name, reserved)
        return None

    async def _update_allocation(self, name: str, reserved: list[Network]) -> None:
        assert self.allocator is not None
        proposed = [str(c) for c in reserved]
        node = self.node_informer.store.get(name)
        if node is None:
            self.allocator.give_back(reserved)
            self.log.error("Failed while getting node for updating Node.Spec.PodCIDRs", node=name)
            raise AllocationError(f'node "{name}" not found')
        current = node_pod_cidrs(node)
        if current == proposed:
            self.log.debug("Node already has allocated CIDR. It matches the proposed one", node=name,
                           podCIDRs=proposed)
            return
        if current:
            self.log.error("Node already has a CIDR allocated. Releasing the new one", node=name, podCIDRs=current)
            self.allocator.give_back(reserved)
            return
        error: ApiError | None = None
        for _ in range(CIDR_UPDATE_RETRIES):
            try:
                await self.ctx.client.patch(NODES, name, pod_cidrs_patch(proposed), patch_type="strategic")
            except ApiError as err:
                error = err
                continue
            self.log.info("Set node PodCIDR", node=name, podCIDRs=json.dumps(proposed))
            return
        assert error is not None
        self._record(node, CIDR_ASSIGNMENT_FAILED)
        if error.reason != "ServerTimeout":
            self.log.error("CIDR assignment for node failed. Releasing allocated CIDR", node=name,
                           error=str(error))
            self.allocator.give_back(reserved)
        raise AllocationError(f"failed to patch node CIDR: {error}")

    def _record(self, node: Obj, status: str) -> None:
        name = str(meta(node).get("name") or "")
        ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": meta(node).get("uid") or ""}}
        self.recorder.event(ref, "Normal", status, f"Node {name} status is now: {status}")
