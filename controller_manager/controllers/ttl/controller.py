"""The TTL controller: sets the ``node.alpha.kubernetes.io/ttl`` annotation on every Node to how long its
kubelet may cache Secrets and ConfigMaps, chosen by cluster size (kube-controller-manager's ``ttl-controller``,
``pkg/controller/ttl/ttl_controller.go``).

Guarantees:
- The desired TTL follows the number of Nodes the informer has shown (added minus deleted) through upstream's
  table of overlapping ranges: 0 s up to 100 nodes, 15 s from 90 to 500, 30 s from 450 to 1000, 60 s from 900
  to 2000, 300 s from 1800. Growing past a range's ``size_max`` moves one range up; shrinking below its
  ``size_min`` moves one range down (hysteresis: 101 nodes give 15 s, and it stays 15 s down to 90 nodes).
- Every Node added or updated (resyncs included) is queued; its sync patches the annotation (a strategic-merge
  patch of just that key, the decimal number of seconds) unless the cached Node already carries the desired
  value as an integer. A change of the desired TTL does not queue all Nodes: as upstream, each Node picks it up
  with its next update (kubelets update their Node's status every few seconds).
- A Node gone from the cache is nothing to do; a failed patch is retried with backoff. Deleted Nodes only
  lower the count. No events, no metrics of its own (upstream has none). Work queue ``ttlcontroller``,
  5 workers (upstream's fixed count; there is no flag).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from controller_manager.api.meta import key_of, meta
from controller_manager.api.resources import NODES
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Event, Updated

__all__ = ["TTL_ANNOTATION", "TTL_BOUNDARIES", "TTLBoundary", "TTLController", "annotation_int", "ttl_patch"]

Obj = Mapping[str, Any]

# v1.ObjectTTLAnnotationKey
TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"

_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class TTLBoundary:
    """One cluster-size range and the TTL that goes with it."""

    size_min: int
    size_max: int
    ttl_seconds: int


TTL_BOUNDARIES: tuple[TTLBoundary, ...] = (
    TTLBoundary(0, 100, 0),
    TTLBoundary(90, 500, 15),
    TTLBoundary(450, 1000, 30),
    TTLBoundary(900, 2000, 60),
    TTLBoundary(1800, _MAX_INT32, 300),
)

# strconv.Atoi: an optional sign and decimal digits, nothing else (no spaces, no underscores).
_ATOI = re.compile(r"[+-]?[0-9]+")


def annotation_int(node: Obj, key: str) -> int | None:
    """The annotation ``key`` of ``node`` as an integer; None when absent or not an integer."""
    annotations = meta(node).get("annotations")
    if not isinstance(annotations, Mapping):
        return None
    value = annotations.get(key)
    if not isinstance(value, str) or _ATOI.fullmatch(value) is None:
        return None
    return int(value)


def ttl_patch(ttl_seconds: int) -> dict[str, Any]:
    """The strategic-merge patch setting the TTL annotation (what upstream's two-way merge patch amounts to)."""
    return {"metadata": {"annotations": {TTL_ANNOTATION: str(ttl_seconds)}}}


class TTLController(Controller):
    """Nodes -> their TTL annotation. Its queue holds Node names."""

    name: ClassVar[str] = "ttl-controller"
    alias: ClassVar[str] = "ttl"
    queue_name: ClassVar[str | None] = "ttlcontroller"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        # Nodes seen (added minus deleted), the range of TTL_BOUNDARIES that count is in, and its TTL.
        self.node_count = 0
        self.boundary_step = 0
        self.desired_ttl_seconds = TTL_BOUNDARIES[0].ttl_seconds
        self.node_informer = ctx.informers.informer(NODES)
        self.node_informer.add_handler(self._on_node)

    # --- event handlers (synchronous) -------------------------------------------------------------

    def _on_node(self, event: Event) -> None:
        if isinstance(event, Added):
            self.add_node(event.obj)
        elif isinstance(event, Updated):
            # Every update: when the cluster's size moves the TTL, each node is fixed on its next status update.
            self.queue.add(key_of(event.new))
        else:
            self.delete_node(event.obj)

    def add_node(self, node: Obj) -> None:
        self.node_count += 1
        if self.node_count > TTL_BOUNDARIES[self.boundary_step].size_max:
            self.boundary_step += 1
            self.desired_ttl_seconds = TTL_BOUNDARIES[self.boundary_step].ttl_seconds
        self.queue.add(key_of(node))

    def delete_node(self, node: Obj) -> None:
        self.node_count -= 1
        if self.node_count < TTL_BOUNDARIES[self.boundary_step].size_min:
            self.boundary_step -= 1
            self.desired_ttl_seconds = TTL_BOUNDARIES[self.boundary_step].ttl_seconds
        # Nothing to sync: the node is gone.

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        node = self.node_informer.store.get(key)
        if node is None:
            return None
        desired = self.desired_ttl_seconds
        current = annotation_int(node, TTL_ANNOTATION)
        if current is None:
            annotations = meta(node).get("annotations")
            if isinstance(annotations, Mapping) and TTL_ANNOTATION in annotations:
                self.log.info("could not convert the value with annotation key for the node",
                              annotation_value=annotations.get(TTL_ANNOTATION), annotation_key=TTL_ANNOTATION,
                              node=key)
        elif current == desired:
            return None
        await self.patch_node(node, desired)
        return None

    async def patch_node(self, node: Obj, ttl_seconds: int) -> None:
        """Patch ``node``'s TTL annotation to ``ttl_seconds`` (always sends the patch)."""
        name = str(meta(node).get("name") or "")
        try:
            await self.ctx.client.patch(NODES, name, ttl_patch(ttl_seconds), patch_type="strategic")
        except Exception as err:
            self.log.debug("failed to change ttl annotation for node", node=name, error=str(err))
            raise
        self.log.debug("changed ttl annotation", node=name, ttl=f"{ttl_seconds}s")
