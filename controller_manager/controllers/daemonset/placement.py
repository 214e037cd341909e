"""Which nodes a DaemonSet's pods belong on (``NodeShouldRunDaemonPod`` and its predicates).

Guarantees:
- :func:`node_should_run_daemon_pod` answers ``(should_run, should_continue_running)`` exactly as upstream:
  a template ``nodeName`` naming another node, a ``nodeSelector`` or required node affinity the node does not
  match -> ``(False, False)``; an untolerated ``NoSchedule``/``NoExecute`` taint -> ``should_run`` False, and
  ``should_continue_running`` False only if an untolerated taint is ``NoExecute``. The pod judged is the
  template plus the tolerations every daemon pod gets. Resources, host ports and ``spec.unschedulable`` are
  left to the scheduler (upstream stopped simulating them), so they never matter here.
- Node affinity follows ``nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)`` (controllerutil/nodeaffinity):
  the nodeSelector ANDed with the required terms; terms are ORed, a term ANDs its label expressions and
  ``metadata.name`` field expressions; an empty term or one that does not parse matches nothing.
- A node whose labels or taints cannot be read raises :class:`MalformedNode` (the caller reports it and leaves
  that node's pods alone) instead of crashing or guessing.
- :func:`should_ignore_node_update` is True when neither labels nor taints changed: nothing else of a node
  can change the answer above.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.taints import EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, find_untolerated_taint
from controller_manager.controllerutil.nodeaffinity import pod_spec_matches_node

from .util import add_or_update_daemon_pod_tolerations

__all__ = [
    "MalformedNode",
    "node_should_run_daemon_pod",
    "pod_creation_order_key",
    "should_ignore_node_update",
]

Obj = Mapping[str, Any]

_TAINT_EFFECTS = frozenset({EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE, "PreferNoSchedule"})


class MalformedNode(ValueError):
    """The node's labels or taints are not what the API allows."""


def _node_labels(node: Obj) -> Mapping[str, str]:
    labels = meta(node).get("labels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise MalformedNode(f"labels are not a map of strings: {labels!r}")
    return labels


def _node_taints(node: Obj) -> list[Obj]:
    taints = (node.get("spec") or {}).get("taints") or []
    if not isinstance(taints, list):
        raise MalformedNode(f"spec.taints is not a list: {taints!r}")
    for taint in taints:
        if not isinstance(taint, Mapping) or not isinstance(taint.get("key"), str) or not taint.get("key"):
            raise MalformedNode(f"taint without a key: {taint!r}")
        if taint.get("effect") not in _TAINT_EFFECTS:
            raise MalformedNode(f"taint {taint.get('key')} has an unknown effect {taint.get('effect')!r}")
    return taints


def node_should_run_daemon_pod(node: Obj, ds: Obj) -> tuple[bool, bool]:
    """``(should_run, should_continue_running)`` for the DaemonSet's pod on the node."""
    node_name = str(meta(node).get("name") or "")
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    wanted_node = pod_spec.get("nodeName")
    if wanted_node and wanted_node != node_name:
        return False, False
    labels = _node_labels(node)
    taints = _node_taints(node)
    if not pod_spec_matches_node(pod_spec, node_name, labels):
        return False, False
    if not taints:
        # Nothing to tolerate (most nodes): the tolerations need not be built, once per node per sync.
        return True, True
    tolerations = add_or_update_daemon_pod_tolerations(pod_spec)
    if find_untolerated_taint(tolerations, taints, (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)) is None:
        return True, True
    # A pod already there may stay unless a NoExecute taint would evict it anyway.
    return False, find_untolerated_taint(tolerations, taints, (EFFECT_NO_EXECUTE,)) is None


def should_ignore_node_update(old: Obj, cur: Obj) -> bool:
    """Nothing that placement reads changed (labels and taints equal)."""
    return ((meta(old).get("labels") or {}) == (meta(cur).get("labels") or {})
            and ((old.get("spec") or {}).get("taints") or []) == ((cur.get("spec") or {}).get("taints") or []))


def pod_creation_order_key(pod: Obj) -> tuple[bool, float, str]:
    """Sort key of ``podByCreationTimestampAndPhase``: scheduled pods first, then oldest, then by name."""
    m = meta(pod)
    created = parse_time(m.get("creationTimestamp"))
    unscheduled = not (pod.get("spec") or {}).get("nodeName")
    return unscheduled, created if created is not None else float("-inf"), str(m.get("name") or "")
