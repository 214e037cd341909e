"""Taint/toleration matching, as core/v1 ``Toleration.ToleratesTaint`` and the scheduling helpers.

Guarantees:
- ``tolerates`` follows upstream exactly: an empty toleration effect matches every effect; a
  non-empty key must equal the taint's key (an empty key matches every key); operator ``Exists``
  ignores the value, ``Equal`` (or empty) compares values; ``Gt``/``Lt`` compare both values as
  int64 (the TaintTolerationComparisonOperators feature) and never tolerate unparsable values;
  any other operator tolerates nothing.
- Inputs are the API's JSON (plain mappings) and are never mutated; ``None`` lists are empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "EFFECT_NO_EXECUTE",
    "EFFECT_NO_SCHEDULE",
    "EFFECT_PREFER_NO_SCHEDULE",
    "TAINT_NODE_NOT_READY",
    "TAINT_NODE_UNREACHABLE",
    "TAINT_NODE_UNSCHEDULABLE",
    "find_untolerated_taint",
    "taint_to_string",
    "tolerates",
    "tolerates_all",
    "untolerated_taints",
]

EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"

# Well-known taint keys (k8s.io/api/core/v1 well_known_taints.go).
TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NODE_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_NODE_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_NODE_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_NODE_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

_SCHEDULING_EFFECTS = (EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _s(obj: Mapping[str, Any], field: str) -> str:
    value = obj.get(field)
    return value if isinstance(value, str) else ""


def _int64(text: str) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, decimal digits only, within int64.
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (v1.Toleration.ToleratesTaint)."""
    effect = _s(toleration, "effect")
    if effect and effect != _s(taint, "effect"):
        return False
    key = _s(toleration, "key")
    if key and key != _s(taint, "key"):
        return False
    operator = _s(toleration, "operator")
    if operator in ("", "Equal"):
        return _s(toleration, "value") == _s(taint, "value")
    if operator == "Exists":
        return True
    if operator in ("Gt", "Lt"):
        threshold = _int64(_s(toleration, "value"))
        actual = _int64(_s(taint, "value"))
        if threshold is None or actual is None:
            return False
        return actual > threshold if operator == "Gt" else actual < threshold
    return False


def _tolerated_by_any(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def untolerated_taints(
    tolerations: Iterable[Mapping[str, Any]] | None,
    taints: Iterable[Mapping[str, Any]] | None,
    effects: Iterable[str] | None = _SCHEDULING_EFFECTS,
) -> list[Mapping[str, Any]]:
    """The taints with one of ``effects`` (all effects if None) that no toleration tolerates, in order."""
    wanted = None if effects is None else frozenset(effects)
    tols = list(tolerations or ())
    return [
        taint
        for taint in taints or ()
        if (wanted is None or _s(taint, "effect") in wanted) and not _tolerated_by_any(tols, taint)
    ]


def find_untolerated_taint(
    tolerations: Iterable[Mapping[str, Any]] | None,
    taints: Iterable[Mapping[str, Any]] | None,
    effects: Iterable[str] | None = _SCHEDULING_EFFECTS,
) -> Mapping[str, Any] | None:
    """The first taint (with one of ``effects``) not tolerated, or None (FindMatchingUntoleratedTaint)."""
    wanted = None if effects is None else frozenset(effects)
    tols = list(tolerations or ())
    for taint in taints or ():
        if (wanted is None or _s(taint, "effect") in wanted) and not _tolerated_by_any(tols, taint):
            return taint
    return None


def tolerates_all(
    tolerations: Iterable[Mapping[str, Any]] | None,
    taints: Iterable[Mapping[str, Any]] | None,
    effects: Iterable[str] | None = _SCHEDULING_EFFECTS,
) -> bool:
    """Whether every taint with one of ``effects`` (all effects if None) is tolerated."""
    return find_untolerated_taint(tolerations, taints, effects) is None


def taint_to_string(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` with no value), as v1.Taint.ToString()."""
    key, value, effect = _s(taint, "key"), _s(taint, "value"), _s(taint, "effect")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"
