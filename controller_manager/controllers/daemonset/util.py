"""Pure helpers of the DaemonSet controller (``pkg/controller/daemon/util/daemonset_util.go``).

Guarantees:
- :func:`add_or_update_daemon_pod_tolerations` returns a new toleration list with the tolerations every daemon
  pod gets (not-ready and unreachable ``NoExecute`` without tolerationSeconds; disk/memory/pid-pressure and
  unschedulable ``NoSchedule``; network-unavailable ``NoSchedule`` for host-network pods), each replacing a
  toleration with the same key, operator, value and effect in place, as ``AddOrUpdateTolerationInPodSpec``.
- :func:`create_pod_template` builds the template daemon pods are made from (tolerations added, the
  ``pod-template-generation`` and ``controller-revision-hash`` labels set); the input is never mutated.
- :func:`replace_node_name_affinity` gives an affinity whose required node affinity is exactly
  ``matchFields metadata.name In [node]`` (the daemon pod's only placement rule for the scheduler); preferred
  terms and other affinities are kept.
- :func:`surge_count` / :func:`unavailable_count` scale ``maxSurge`` / ``maxUnavailable`` (int or percent,
  rounded up) of a RollingUpdate DaemonSet; anything else counts 0. Bad values raise ValueError.
- Objects are the API's JSON (plain dicts) and are only read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.intstr import scaled_value
from controller_manager.api.meta import deep_copy, meta
from controller_manager.api.taints import (
    EFFECT_NO_EXECUTE,
    EFFECT_NO_SCHEDULE,
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
)

__all__ = [
    "CONTROLLER_REVISION_HASH_LABEL",
    "DEPRECATED_TEMPLATE_GENERATION",
    "OBJECT_NAME_FIELD",
    "ON_DELETE",
    "ROLLING_UPDATE",
    "TEMPLATE_GENERATION_LABEL",
    "TargetNodeError",
    "add_or_update_daemon_pod_tolerations",
    "add_or_update_toleration",
    "allows_surge",
    "create_pod_template",
    "get_target_node_name",
    "get_template_generation",
    "is_pod_updated",
    "replace_node_name_affinity",
    "surge_count",
    "unavailable_count",
]

Obj = Mapping[str, Any]

# apps.DefaultDaemonSetUniqueLabelKey (= ControllerRevisionHashLabelKey).
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
# extensions.DaemonSetTemplateGenerationKey: kept on pods for pods made before revisions existed.
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
# apps/v1 carries the internal spec.templateGeneration in this annotation.
DEPRECATED_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
OBJECT_NAME_FIELD = "metadata.name"

ROLLING_UPDATE = "RollingUpdate"
ON_DELETE = "OnDelete"


def get_template_generation(ds: Obj) -> int | None:
    """The deprecated template generation annotation as an int; None if absent. ValueError if unparsable."""
    annotations = meta(ds).get("annotations") or {}
    value = annotations.get(DEPRECATED_TEMPLATE_GENERATION)
    if value is None:
        return None
    text = str(value)
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit():
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    return int(text)


def _same_toleration(a: Obj, b: Obj) -> bool:
    # v1.Toleration.MatchToleration: key, operator, value and effect; tolerationSeconds is not compared.
    return all((a.get(f) or "") == (b.get(f) or "") for f in ("key", "operator", "value", "effect"))


def add_or_update_toleration(tolerations: Sequence[Obj] | None, toleration: Obj) -> list[dict[str, Any]]:
    """``AddOrUpdateTolerationInPodSpec``: replace a matching toleration in place, else append."""
    out: list[dict[str, Any]] = []
    replaced = False
    for existing in tolerations or ():
        if _same_toleration(existing, toleration):
            out.append(dict(toleration))
            replaced = True
        else:
            out.append(dict(existing))
    if not replaced:
        out.append(dict(toleration))
    return out


def _exists(key: str, effect: str) -> dict[str, str]:
    return {"key": key, "operator": "Exists", "effect": effect}


# In upstream's order: the order shows in every daemon pod's spec.
_DAEMON_TOLERATIONS = (
    # Node problems must not evict daemon pods (taint-based eviction), so no tolerationSeconds.
    _exists(TAINT_NODE_NOT_READY, EFFECT_NO_EXECUTE),
    _exists(TAINT_NODE_UNREACHABLE, EFFECT_NO_EXECUTE),
    # TaintNodesByCondition: daemons run despite pressure and cordoning.
    _exists(TAINT_NODE_DISK_PRESSURE, EFFECT_NO_SCHEDULE),
    _exists(TAINT_NODE_MEMORY_PRESSURE, EFFECT_NO_SCHEDULE),
    _exists(TAINT_NODE_PID_PRESSURE, EFFECT_NO_SCHEDULE),
    _exists(TAINT_NODE_UNSCHEDULABLE, EFFECT_NO_SCHEDULE),
)
_HOST_NETWORK_TOLERATION = _exists(TAINT_NODE_NETWORK_UNAVAILABLE, EFFECT_NO_SCHEDULE)


def add_or_update_daemon_pod_tolerations(pod_spec: Obj) -> list[dict[str, Any]]:
    """The pod spec's tolerations plus those every daemon pod gets (``AddOrUpdateDaemonPodTolerations``)."""
    tolerations: list[dict[str, Any]] = [dict(t) for t in pod_spec.get("tolerations") or ()]
    wanted = list(_DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(_HOST_NETWORK_TOLERATION)
    for toleration in wanted:
        tolerations = add_or_update_toleration(tolerations, toleration)
    return tolerations


def create_pod_template(template: Obj, generation: int | None, hash_: str) -> dict[str, Any]:
    """The template daemon pods are created from (``CreatePodTemplate``)."""
    new: dict[str, Any] = deep_copy(dict(template))
    spec = dict(new.get("spec") or {})
    spec["tolerations"] = add_or_update_daemon_pod_tolerations(spec)
    new["spec"] = spec
    metadata = dict(new.get("metadata") or {})
    labels = dict(metadata.get("labels") or {})
    if generation is not None:
        labels[TEMPLATE_GENERATION_LABEL] = str(generation)
    if hash_:
        labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
    metadata["labels"] = labels
    new["metadata"] = metadata
    return new


def _strategy(ds: Obj) -> Mapping[str, Any]:
    return (ds.get("spec") or {}).get("updateStrategy") or {}


def surge_count(ds: Obj, number_to_schedule: int) -> int:
    """Extra pods a rolling update may run (``SurgeCount``); 0 unless RollingUpdate with maxSurge."""
    strategy = _strategy(ds)
    if strategy.get("type") != ROLLING_UPDATE:
        return 0
    rolling = strategy.get("rollingUpdate")
    if not rolling or rolling.get("maxSurge") is None:
        return 0
    return scaled_value(rolling.get("maxSurge"), number_to_schedule, True)


def unavailable_count(ds: Obj, number_to_schedule: int) -> int:
    """Nodes a rolling update may leave without an available pod (``UnavailableCount``)."""
    strategy = _strategy(ds)
    if strategy.get("type") != ROLLING_UPDATE:
        return 0
    rolling = strategy.get("rollingUpdate")
    if not rolling:
        return 0
    return scaled_value(rolling.get("maxUnavailable"), number_to_schedule, True)


def allows_surge(ds: Obj) -> bool:
    """Whether the DaemonSet may run two pods on one node during an update (``AllowsSurge``)."""
    try:
        return surge_count(ds, 1) > 0
    except ValueError:
        return False


def is_pod_updated(pod: Obj, hash_: str, template_generation: int | None) -> bool:
    """The pod carries the current revision's hash, or the current template generation (``IsPodUpdated``)."""
    labels = meta(pod).get("labels") or {}
    template_matches = (template_generation is not None
                        and labels.get(TEMPLATE_GENERATION_LABEL) == str(template_generation))
    hash_matches = bool(hash_) and labels.get(CONTROLLER_REVISION_HASH_LABEL) == hash_
    return hash_matches or template_matches


def replace_node_name_affinity(affinity: Obj | None, node_name: str) -> dict[str, Any]:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: required node affinity selects just ``node_name``."""
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": OBJECT_NAME_FIELD, "operator": "In", "values": [node_name]}]}]}
    out: dict[str, Any] = deep_copy(dict(affinity or {}))
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = selector
    out["nodeAffinity"] = node_affinity
    return out


class TargetNodeError(ValueError):
    """A daemon pod names no node, neither in spec.nodeName nor in its node affinity."""


def get_target_node_name(pod: Obj) -> str:
    """The node a daemon pod is for: spec.nodeName, else its ``metadata.name In [x]`` affinity
    (``GetTargetNodeName``). Raises :class:`TargetNodeError` if neither says."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    m = meta(pod)
    where = f"{m.get('namespace', '')}/{m.get('name', '')}"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        raise TargetNodeError(f"no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution "
                              f"for pod {where}")
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        raise TargetNodeError(f"no nodeSelectorTerms in requiredDuringSchedulingIgnoredDuringExecution of pod {where}")
    for term in terms:
        for req in term.get("matchFields") or ():
            if req.get("key") == OBJECT_NAME_FIELD and req.get("operator") == "In":
                values = req.get("values") or []
                if len(values) != 1:
                    raise TargetNodeError(f"the matchFields value of '{OBJECT_NAME_FIELD}' is not unique for pod "
                                          f"{where}")
                return str(values[0])
    raise TargetNodeError(f"no node name found for pod {where}")
