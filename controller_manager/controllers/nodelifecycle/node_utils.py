"""Node helpers of the node lifecycle controller: conditions, taint sets, zone keys and the API writes that
change taints and pod readiness (``pkg/util/taints``, ``pkg/controller/util/node``, ``controller_utils.go``'s
``AddOrUpdateTaintOnNode``/``RemoveTaintOffNode``, ``component-helpers/node/topology``).

Guarantees:
- Pure helpers never mutate their inputs (cached objects); they return new lists/dicts.
- Taints are matched as ``v1.Taint.MatchTaint`` does: same key and effect. Anything in ``spec.taints`` that is
  not a mapping is ignored (and kept as it is when the list is rewritten), so a malformed node never crashes
  a pass.
- Taint writes are a JSON merge patch of the whole ``spec.taints`` list carrying the node's
  ``resourceVersion``: a concurrent change is a 409, re-read and retried (up to 5 tries), never overwritten.
  One difference from upstream, on purpose: adding a taint that is already there (same key, value and effect)
  keeps it with its original ``timeAdded``, so a restarted controller does not push tolerationSeconds
  deadlines (which are computed from ``timeAdded``) into the future.
- :func:`mark_pods_not_ready` writes each pod's Ready=False through ``/status`` with the cached
  resourceVersion, skips pods already not ready and pods that are gone, records ``Warning NodeNotReady`` on
  each pod it changed, and raises once at the end if any write failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from controller_manager.api.meta import format_time, meta
from controller_manager.api.resources import NODES, PODS
from controller_manager.client import ApiClient
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.clock import Clock
from controller_manager.runtime.events import EventRecorder

__all__ = [
    "LABEL_NODE_DISRUPTION_EXCLUSION",
    "NodeUpdateError",
    "add_or_update_taint",
    "get_node_condition",
    "get_zone_key",
    "mapping_field",
    "mark_pods_not_ready",
    "node_ref",
    "record_node_event",
    "record_node_status_change",
    "remove_taint_off_node",
    "remove_taints",
    "swap_node_controller_taint",
    "taint_exists",
    "taint_set_diff",
    "taints_of",
]

Obj = Mapping[str, Any]

LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
# Nodes with this label are left out of the zone health computation.
LABEL_NODE_DISRUPTION_EXCLUSION = "node.kubernetes.io/exclude-disruption"

UPDATE_TAINT_TRIES = 5

_log = structlog.get_logger("controller_manager.nodelifecycle")


class NodeUpdateError(Exception):
    """A write to a node or its pods failed (the message says which and why)."""


# --- reading nodes ----------------------------------------------------------------------------------------

def mapping_field(obj: Obj, name: str) -> Mapping[str, Any]:
    """``obj[name]`` if it is a mapping, else an empty one (malformed objects read as empty)."""
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def get_node_condition(status: Obj | None, condition_type: str) -> Mapping[str, Any] | None:
    """The first condition of ``condition_type`` in a NodeStatus, or None (malformed entries are skipped)."""
    if not isinstance(status, Mapping):
        return None
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == condition_type:
            return cond
    return None


def taints_of(node: Obj) -> list[Mapping[str, Any]]:
    """The node's well-formed taints (mappings), in order."""
    spec = node.get("spec")
    raw = spec.get("taints") if isinstance(spec, Mapping) else None
    if not isinstance(raw, list):
        return []
    return [t for t in raw if isinstance(t, Mapping)]


def get_zone_key(node: Obj) -> str:
    """``region:\\x00:zone`` from the topology labels (beta ones as fallback); "" when both are missing."""
    labels = meta(node).get("labels") or {}
    if not isinstance(labels, Mapping):
        return ""
    zone = labels.get(LABEL_ZONE) or labels.get(LABEL_ZONE_BETA) or ""
    region = labels.get(LABEL_REGION) or labels.get(LABEL_REGION_BETA) or ""
    if not zone and not region:
        return ""
    return f"{region}:\x00:{zone}"


def node_ref(node: Obj) -> dict[str, Any]:
    """The ObjectReference-like object events about a node are recorded on."""
    m = meta(node)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": m.get("name", ""), "uid": m.get("uid", "")}}


# --- taint sets -------------------------------------------------------------------------------------------

def _matches(a: Obj, b: Obj) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def taint_exists(taints: Iterable[Obj], wanted: Obj) -> bool:
    """Some taint has ``wanted``'s key and effect (``TaintExists``)."""
    return any(_matches(t, wanted) for t in taints)


def taint_set_diff(new: Sequence[Obj], old: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(taints in ``new`` not in ``old``, taints in ``old`` not in ``new``), matched by key and effect."""
    to_add = [t for t in new if not taint_exists(old, t)]
    to_remove = [t for t in old if not taint_exists(new, t)]
    return to_add, to_remove


def _same_taint(a: Obj, b: Obj) -> bool:
    return _matches(a, b) and (a.get("value") or "") == (b.get("value") or "")


def add_or_update_taint(taints: Sequence[Any], taint: Obj) -> tuple[list[Any], bool]:
    """``taints`` with ``taint`` added, or replacing the one with its key and effect; (list, changed).
    An identical taint (same key, value, effect) is kept as it is, with its original timeAdded."""
    out: list[Any] = []
    replaced = False
    for existing in taints:
        if isinstance(existing, Mapping) and _matches(existing, taint):
            if _same_taint(existing, taint):
                return list(taints), False
            out.append(dict(taint))
            replaced = True
            continue
        out.append(existing)
    if not replaced:
        out.append(dict(taint))
    return out, True


def remove_taints(taints: Sequence[Any], unwanted: Iterable[Obj]) -> tuple[list[Any], bool]:
    """``taints`` without those matching any of ``unwanted`` by key and effect; (list, changed)."""
    drop = list(unwanted)
    out = [t for t in taints if not (isinstance(t, Mapping) and any(_matches(t, u) for u in drop))]
    return out, len(out) != len(taints)


# --- taint writes -----------------------------------------------------------------------------------------

def _raw_taints(node: Obj) -> list[Any]:
    spec = node.get("spec")
    raw = spec.get("taints") if isinstance(spec, Mapping) else None
    return list(raw) if isinstance(raw, list) else []


async def _patch_taints(client: ApiClient, node: Obj, taints: list[Any]) -> dict[str, Any]:
    # The whole list is replaced (spec.taints has no merge key); the resourceVersion makes it conditional.
    patch = {"metadata": {"resourceVersion": meta(node).get("resourceVersion")},
             "spec": {"taints": taints or None}}
    return await client.patch(NODES, str(meta(node).get("name", "")), patch, patch_type="merge")


async def _update_taints(client: ApiClient, name: str, add: Sequence[Obj], remove: Sequence[Obj]) -> None:
    """Re-read the node and apply ``add`` then ``remove``; retried on conflicts. NotFound propagates."""
    for attempt in range(UPDATE_TAINT_TRIES):
        node = await client.get(NODES, name)
        taints = _raw_taints(node)
        changed = False
        for taint in add:
            taints, did = add_or_update_taint(taints, taint)
            changed = changed or did
        if remove:
            taints, did = remove_taints(taints, remove)
            changed = changed or did
        if not changed:
            return
        try:
            await _patch_taints(client, node, taints)
            return
        except Conflict:
            if attempt == UPDATE_TAINT_TRIES - 1:
                raise


async def swap_node_controller_taint(client: ApiClient, clock: Clock, add: Sequence[Obj], remove: Sequence[Obj],
                                     node: Obj) -> bool:
    """Add ``add`` (stamped ``timeAdded`` now) and remove ``remove`` on ``node``; True on success
    (``SwapNodeControllerTaint``). Failures are logged, not raised."""
    name = str(meta(node).get("name", ""))
    stamp = format_time(clock.now())
    stamped = [{**t, "timeAdded": stamp} for t in add]
    try:
        if stamped:
            await _update_taints(client, name, stamped, ())
        await remove_taint_off_node(client, node, name, *remove)
    except ApiError as err:
        _log.error("unable to swap node taints", node=name, add=[t.get("key") for t in add],
                   remove=[t.get("key") for t in remove], error=str(err))
        return False
    return True


async def remove_taint_off_node(client: ApiClient, node: Obj | None, name: str, *taints: Obj) -> None:
    """Remove ``taints`` from node ``name``; no API call when ``node`` (a cached copy) has none of them.
    Raises the API error on failure (NotFound included)."""
    if not taints:
        return
    if node is not None and not any(taint_exists(taints_of(node), t) for t in taints):
        return
    await _update_taints(client, name, (), taints)


# --- pods and events --------------------------------------------------------------------------------------

def _not_ready_status(pod: Obj, now: str) -> dict[str, Any] | None:
    """The pod's status with Ready=False (``UpdatePodCondition``), or None if nothing changes."""
    status = mapping_field(pod, "status")
    raw = status.get("conditions")
    conditions: list[Any] = raw if isinstance(raw, list) else []
    for i, cond in enumerate(conditions):
        if not isinstance(cond, Mapping) or cond.get("type") != "Ready":
            continue
        if cond.get("status") == "False":
            return None
        new_cond = {**cond, "status": "False", "lastTransitionTime": now}
        new_conditions = [*conditions[:i], new_cond, *conditions[i + 1:]]
        return {**status, "conditions": new_conditions}
    return None


async def mark_pods_not_ready(client: ApiClient, recorder: EventRecorder, clock: Clock, pods: Iterable[Obj],
                              node_name: str) -> None:
    """Set Ready=False on each of ``pods`` bound to ``node_name`` (``MarkPodsNotReady``)."""
    errors: list[str] = []
    now = format_time(clock.now())
    for pod in pods:
        if mapping_field(pod, "spec").get("nodeName") != node_name:
            continue
        status = _not_ready_status(pod, now)
        if status is None:
            continue
        updated = {**pod, "status": status}
        # Upstream sends the whole pod back (UpdateStatus). The informer cache holds a projection of each pod
        # (fields no controller reads are dropped), so writing it back whole would erase them: patch only the
        # Ready condition instead, carrying the resourceVersion so a concurrent change still means a conflict.
        ready = next(c for c in status["conditions"] if isinstance(c, Mapping) and c.get("type") == "Ready")
        patch = {"metadata": {"resourceVersion": meta(pod).get("resourceVersion")},
                 "status": {"conditions": [ready]}}
        try:
            await client.patch(PODS, str(meta(pod).get("name")), patch, str(meta(pod).get("namespace")),
                               patch_type="strategic", subresource="status")
        except NotFound:
            continue
        except ApiError as err:
            _log.info("Failed to update status for pod", pod=f"{meta(pod).get('namespace')}/{meta(pod).get('name')}",
                      error=str(err))
            errors.append(f"{meta(pod).get('namespace')}/{meta(pod).get('name')}: {err}")
        recorder.event(updated, "Warning", "NodeNotReady", "Node is not ready", resource=PODS)
    if errors:
        raise NodeUpdateError("; ".join(errors))


def record_node_event(recorder: EventRecorder, node: Obj, event_type: str, reason: str, message: str) -> None:
    """``RecordNodeEvent``: "Node <name> event: <message>" on the node."""
    name = meta(node).get("name", "")
    recorder.event(node_ref(node), event_type, reason, f"Node {name} event: {message}")


def record_node_status_change(recorder: EventRecorder, node: Obj, new_status: str) -> None:
    """``RecordNodeStatusChange``: "Node <name> status is now: <status>" on the node."""
    name = meta(node).get("name", "")
    recorder.event(node_ref(node), "Normal", new_status, f"Node {name} status is now: {new_status}")
