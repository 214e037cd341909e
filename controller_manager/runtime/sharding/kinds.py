"""Which kinds are sharded, and how an object finds its root.

A *root* is an object of a root kind with no controller reference to a sharded owner kind (a Deployment; a
ReplicaSet no Deployment controls; a Job no CronJob controls; ...). Everything a root's controllers create,
transitively (ReplicaSets, Jobs, Pods, ControllerRevisions), belongs to the same shard as the root and carries
its shard label. Services, PodDisruptionBudgets and everything else select objects across owners and stay
with the leader (docs/sharding.md: the cross-shard rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import controller_ref, meta
from controller_manager.api.resources import (
    CONTROLLERREVISIONS,
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    Resource,
)

ROOT_KINDS: tuple[Resource, ...] = (DEPLOYMENTS, STATEFULSETS, DAEMONSETS, CRONJOBS, JOBS, REPLICASETS)
# Dependents, deepest first: the order the sharder relabels a subtree in, so that a root's new owner finds
# every dependent before the root itself.
DEPENDENT_KINDS: tuple[Resource, ...] = (PODS, CONTROLLERREVISIONS, REPLICASETS, JOBS)
SHARDED_RESOURCES: tuple[Resource, ...] = (*ROOT_KINDS, PODS, CONTROLLERREVISIONS)
# Owner kinds a controller reference may name inside a sharded subtree, by (apiVersion, kind).
OWNER_KINDS: Mapping[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r for r in (DEPLOYMENTS, STATEFULSETS, DAEMONSETS, CRONJOBS, JOBS, REPLICASETS)}

_SHARDED = {(r.group, r.plural) for r in SHARDED_RESOURCES}


def is_sharded(res: Resource) -> bool:
    """Whether a member's informers for ``res`` select by its shard label."""
    return (res.group, res.plural) in _SHARDED


def sharded_owner(obj: Mapping[str, Any]) -> tuple[Resource, Mapping[str, Any]] | None:
    """The sharded kind and controller reference of ``obj``'s owner, or None when ``obj`` has none (a root, if
    its kind is a root kind)."""
    ref = controller_ref(obj)
    if ref is None:
        return None
    res = OWNER_KINDS.get((str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")))
    return None if res is None else (res, ref)


def is_root(res: Resource, obj: Mapping[str, Any]) -> bool:
    return res in ROOT_KINDS and sharded_owner(obj) is None


def hash_key(obj: Mapping[str, Any]) -> str:
    """What the ring hashes for a root: ``<namespace>/<name>``."""
    m = meta(obj)
    return f"{m.get('namespace') or ''}/{m.get('name') or ''}"


def parse_handover(text: str | None) -> dict[str, int]:
    """``"pods=12,replicasets=15"`` -> ``{"pods": 12, "replicasets": 15}``; malformed parts are skipped."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        plural, _, rv = part.partition("=")
        if plural and rv.isdigit():
            out[plural.strip()] = int(rv)
    return out


def format_handover(rvs: Mapping[str, int]) -> str:
    return ",".join(f"{plural}={rv}" for plural, rv in sorted(rvs.items()))
