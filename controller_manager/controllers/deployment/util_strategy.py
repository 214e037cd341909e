"""A Deployment's strategy in numbers: how many pods it wants, may add, may lose (``deployment_util.go``).

Guarantees:
- :func:`resolve_fenceposts` is ``ResolveFenceposts``: maxSurge is scaled rounding *up*, maxUnavailable
  rounding *down*, a missing value counts as 0, and when both resolve to 0 maxUnavailable becomes 1 (so a
  rollout can always make progress). Invalid values raise ``ValueError`` with apimachinery's wording.
- :func:`max_surge`, :func:`max_unavailable` and :func:`min_available` are 0 for non-RollingUpdate strategies;
  :func:`max_unavailable` never exceeds ``spec.replicas`` and is 0 for a Deployment scaled to 0. As upstream
  (validation rejects such objects), an invalid int-or-percent resolves to 0 there instead of raising.
- ``spec.replicas`` missing reads as 1 (the API server's default); a ReplicaSet's missing ``spec.replicas``
  reads as 0 (as the shared ``filter_active_replica_sets`` reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.intstr import IntOrStr, scaled_value

__all__ = [
    "RECREATE",
    "ROLLING_UPDATE",
    "deployment_replicas",
    "is_recreate",
    "is_rolling_update",
    "max_surge",
    "max_unavailable",
    "min_available",
    "replica_set_replicas",
    "resolve_fenceposts",
    "rolling_update_params",
]

Obj = Mapping[str, Any]

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"


def _spec(obj: Obj | None) -> Mapping[str, Any]:
    spec = obj.get("spec") if obj is not None else None
    return spec if isinstance(spec, Mapping) else {}


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def deployment_replicas(deployment: Obj) -> int:
    """``spec.replicas`` (1 when unset, the API default)."""
    return _int(_spec(deployment).get("replicas"), 1)


def replica_set_replicas(rs: Obj | None) -> int:
    """A ReplicaSet's ``spec.replicas`` (0 when unset or when ``rs`` is None)."""
    return _int(_spec(rs).get("replicas"), 0)


def _strategy(deployment: Obj) -> Mapping[str, Any]:
    strategy = _spec(deployment).get("strategy")
    return strategy if isinstance(strategy, Mapping) else {}


def is_rolling_update(deployment: Obj) -> bool:
    return _strategy(deployment).get("type") == ROLLING_UPDATE


def is_recreate(deployment: Obj) -> bool:
    return _strategy(deployment).get("type") == RECREATE


def rolling_update_params(deployment: Obj) -> tuple[IntOrStr | None, IntOrStr | None]:
    """``(maxSurge, maxUnavailable)`` as written (None when unset)."""
    rolling = _strategy(deployment).get("rollingUpdate")
    if not isinstance(rolling, Mapping):
        return None, None
    return rolling.get("maxSurge"), rolling.get("maxUnavailable")


def resolve_fenceposts(
    max_surge_value: IntOrStr | None, max_unavailable_value: IntOrStr | None, desired: int
) -> tuple[int, int]:
    """``(surge, unavailable)`` for ``desired`` replicas; ValueError if either value is invalid."""
    surge = scaled_value(0 if max_surge_value is None else max_surge_value, desired, True)
    unavailable = scaled_value(0 if max_unavailable_value is None else max_unavailable_value, desired, False)
    if surge == 0 and unavailable == 0:
        # Validation forbids both being zero, but rounding a percentage down can get there; allowing one
        # unavailable pod lets old pods go so new ones can come up.
        unavailable = 1
    return surge, unavailable


def _fenceposts(deployment: Obj) -> tuple[int, int]:
    surge_value, unavailable_value = rolling_update_params(deployment)
    try:
        return resolve_fenceposts(surge_value, unavailable_value, deployment_replicas(deployment))
    except ValueError:
        # Validation keeps such values out; upstream ignores the error and reads zeros.
        return 0, 0


def max_surge(deployment: Obj) -> int:
    """How many pods above ``spec.replicas`` a rolling update may run."""
    if not is_rolling_update(deployment):
        return 0
    return _fenceposts(deployment)[0]


def max_unavailable(deployment: Obj) -> int:
    """How many of ``spec.replicas`` may be unavailable during a rolling update (at most ``spec.replicas``)."""
    desired = deployment_replicas(deployment)
    if not is_rolling_update(deployment) or desired == 0:
        return 0
    return min(_fenceposts(deployment)[1], desired)


def min_available(deployment: Obj) -> int:
    """How many pods must stay available during a rolling update."""
    if not is_rolling_update(deployment):
        return 0
    return deployment_replicas(deployment) - max_unavailable(deployment)
