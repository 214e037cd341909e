"""Pod predicates every workload controller shares (``pkg/api/v1/pod/util.go`` and ``controller_utils.go``).

Guarantees:
- Each predicate reads a pod as the API's JSON (a plain dict) and never mutates it; missing fields
  read as Go's zero values (no phase, no conditions, no deletionTimestamp).
- :func:`is_pod_available` is ``podutil.IsPodAvailable``: ready, and either ``min_ready_seconds`` is 0
  or the Ready condition's ``lastTransitionTime + min_ready_seconds`` is strictly before ``now``
  (a Ready condition without a transition time never becomes available when min_ready_seconds > 0).
- Times are epoch seconds (floats), as :func:`controller_manager.api.meta.parse_time` returns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.meta import is_being_deleted, meta, parse_time

__all__ = [
    "POD_FAILED",
    "POD_PENDING",
    "POD_RUNNING",
    "POD_SUCCEEDED",
    "POD_UNKNOWN",
    "count_terminating_pods",
    "filter_active_pods",
    "filter_terminating_pods",
    "get_pod_condition",
    "get_pod_ready_condition",
    "is_pod_active",
    "is_pod_available",
    "is_pod_ready",
    "is_pod_terminal",
    "is_pod_terminating",
    "pod_key",
    "pod_phase",
    "pod_ready_since",
    "split_active_and_terminating",
]

Pod = Mapping[str, Any]

POD_PENDING = "Pending"
POD_RUNNING = "Running"
POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"
POD_UNKNOWN = "Unknown"


def _status(pod: Pod) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if type(status) is dict or isinstance(status, Mapping) else {}


def pod_phase(pod: Pod) -> str:
    return str(_status(pod).get("phase") or "")


def pod_ips(pod: Pod) -> list[str]:
    """The pod's IP addresses, primary first: ``status.podIPs``, else ``status.podIP`` (an informer's cached pod
    keeps podIPs only when dual-stack, as podIPs[0] always equals podIP)."""
    status = _status(pod)
    ips = status.get("podIPs")
    if type(ips) is list and ips:
        return [str(entry["ip"]) for entry in ips if isinstance(entry, Mapping) and entry.get("ip")]
    ip = status.get("podIP")
    return [ip] if isinstance(ip, str) and ip else []


def pod_key(pod: Pod) -> str:
    """``namespace/name`` (``controller.PodKey``): how expectations name the pods they wait for."""
    m = meta(pod)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def get_pod_condition(pod: Pod, condition_type: str) -> Mapping[str, Any] | None:
    """The first status condition of ``condition_type`` (``podutil.GetPodCondition``), or None."""
    for cond in _status(pod).get("conditions") or ():
        if (type(cond) is dict or isinstance(cond, Mapping)) and cond.get("type") == condition_type:
            return cond
    return None


def get_pod_ready_condition(pod: Pod) -> Mapping[str, Any] | None:
    return get_pod_condition(pod, "Ready")


def is_pod_ready(pod: Pod) -> bool:
    """The Ready condition is ``True`` (``podutil.IsPodReady``)."""
    cond = get_pod_ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def pod_ready_since(pod: Pod) -> float | None:
    """When the pod became ready: the Ready=True condition's lastTransitionTime (None if not ready or unset)."""
    cond = get_pod_ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime"))


def is_pod_available(pod: Pod, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least ``min_ready_seconds`` as of ``now`` (``podutil.IsPodAvailable``)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    since = pod_ready_since(pod)
    return since is not None and since + min_ready_seconds < now


def is_pod_terminal(pod: Pod) -> bool:
    """Phase Succeeded or Failed (``podutil.IsPodTerminal``)."""
    return pod_phase(pod) in (POD_SUCCEEDED, POD_FAILED)


def is_pod_active(pod: Pod) -> bool:
    """Not terminal and not being deleted (``controller.IsPodActive``)."""
    return not is_pod_terminal(pod) and not is_being_deleted(pod)


def is_pod_terminating(pod: Pod) -> bool:
    """Being deleted but not yet terminal (``controller.IsPodTerminating``)."""
    return not is_pod_terminal(pod) and is_being_deleted(pod)


def filter_active_pods(pods: Iterable[Pod]) -> list[Pod]:
    """The active pods, in their given order (``controller.FilterActivePods``)."""
    return [p for p in pods if is_pod_active(p)]


def filter_terminating_pods(pods: Iterable[Pod]) -> list[Pod]:
    return [p for p in pods if is_pod_terminating(p)]


def split_active_and_terminating(pods: Iterable[Pod]) -> tuple[list[Pod], list[Pod]]:
    """``(filter_active_pods(pods), filter_terminating_pods(pods))`` in one pass over the pods."""
    active: list[Pod] = []
    terminating: list[Pod] = []
    for p in pods:
        if not is_pod_terminal(p):
            (terminating if is_being_deleted(p) else active).append(p)
    return active, terminating


def count_terminating_pods(pods: Iterable[Pod]) -> int:
    return sum(1 for p in pods if is_pod_terminating(p))
