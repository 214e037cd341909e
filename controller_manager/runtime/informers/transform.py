"""Transforms run on every object before it is cached: strip what no controller reads, share what repeats.

Guarantees:
- A transform never mutates its input; it returns a new object (or the input itself when nothing changes).
- ``strip_managed_fields`` drops ``metadata.managedFields`` (server-side-apply bookkeeping that no controller
  reads and that is often the largest part of an object). ``kubectl.kubernetes.io/last-applied-configuration``
  is kept on purpose: a controller that writes an object back from its cached copy (an update, not a patch)
  would otherwise erase the annotation on the server. Omitting ``managedFields`` in an update is harmless: the
  API server keeps the existing entries.
- ``Sharer.share`` returns a structurally equal copy in which dict keys and short string values are interned and
  identical sub-trees (a pod's tolerations, the projected service-account volume, containers' ``resources``,
  ownerReferences of pods of one ReplicaSet, ...) are one object shared by every cached object holding them.
  This is safe only because cached objects are never mutated (the project's rule). A sub-tree's identity is its
  serialized form (orjson, in C): a repeat costs one serialization and one bytes comparison, no Python walk; the
  form also tells ``1``, ``1.0`` and ``true`` apart. Values under "volatile" keys
  (``resourceVersion``, container IDs, heartbeat times; ``name`` and ``uid`` directly in ``metadata``) are unique
  per object: they are not interned and the sub-tree holding them is not pooled. The root and its direct
  children (``metadata``, ``spec``, ``status``) are never pooled, and a sub-tree is pooled only the second time
  it is seen, so the pool does not fill with things that never repeat.
- The pool forgets sub-trees no cached object holds any more (swept when it has doubled since the last sweep),
  so churn does not grow memory.
- ``project_pod`` drops from pods what no controller reads (the list is at its definition, with why it is safe);
  other kinds pass through untouched.
- ``default_transform`` = strip ``managedFields``, project pods, then share. More per-kind projections compose in
  front of it with ``compose`` without touching any controller.
"""

from __future__ import annotations

import random
import sys
from array import array
from collections.abc import Callable, Iterable
from typing import Any

import orjson

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]

_dumps = orjson.dumps

# Keys whose scalar values are (nearly) unique per object: interning or pooling them would only cost memory.
VOLATILE_KEYS: frozenset[str] = frozenset({"resourceVersion", "containerID", "renewTime", "lastHeartbeatTime"})

# Fields of metadata unique to each object: interning them would only add an entry to the intern table.
# (Deeper down, "name" and "uid" repeat: container names, ownerReferences.)
METADATA_UNIQUE_KEYS: frozenset[str] = frozenset({"name", "uid", "selfLink"})

# Longer strings are rarely repeated (certificates, scripts, last-applied JSON); interning them costs a slot.
MAX_INTERNED_LENGTH = 256
_MIN_SWEEP = 4096
_DOOR_SLOTS = 1 << 16  # 512 KiB per Sharer, whatever the cluster size


def strip_managed_fields(obj: Obj) -> Obj:
    m = obj.get("metadata")
    if not isinstance(m, dict) or "managedFields" not in m:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in m.items() if k != "managedFields"}
    return out


def compose(*transforms: Transform) -> Transform:
    """Apply ``transforms`` left to right."""

    def run(obj: Obj) -> Obj:
        for t in transforms:
            obj = t(obj)
        return obj

    return run


class Sharer:
    """Interns strings and hash-conses identical sub-trees across every object it has seen."""

    def __init__(
        self,
        volatile_keys: Iterable[str] = VOLATILE_KEYS,
        max_interned: int = MAX_INTERNED_LENGTH,
        rng: random.Random | None = None,
    ) -> None:
        self._volatile = frozenset(volatile_keys)
        self._metadata_volatile = self._volatile | METADATA_UNIQUE_KEYS
        self._rng = rng or random.Random()
        self._max = max_interned
        # hash of the serialized form -> (that form, the one shared sub-tree with that content)
        self._pool: dict[int, tuple[bytes, Any]] = {}
        self._sweep_at = _MIN_SWEEP
        self._door = array("q", bytes(8 * _DOOR_SLOTS))
        self._door_mask = _DOOR_SLOTS - 1

    def __len__(self) -> int:
        return len(self._pool)

    def share(self, obj: Obj) -> Obj:
        out, _ = self._canon(obj, 0)
        result: Obj = out
        return self._maybe_sweep(result)

    def _maybe_sweep(self, obj: Obj) -> Obj:
        if len(self._pool) >= self._sweep_at:
            self.sweep()
        return obj

    def sweep(self) -> int:
        """Forget pooled sub-trees nothing else holds; returns how many were dropped (CPython refcounts).

        Besides sub-trees whose objects left the cache, this drops the rare entry pooled as a child of a
        candidate that then matched an older pooled parent (whose own child is an equal, earlier copy).
        """
        pool = self._pool
        dropped = 0
        # A pooled parent keeps its pooled children alive, so dropping parents can free children: repeat.
        while True:
            # Three references mean unused: the pool entry's, the loop variable's and getrefcount's argument.
            dead = [h for h, (_, tree) in pool.items() if sys.getrefcount(tree) <= 3]
            for h in dead:
                del pool[h]
            dropped += len(dead)
            if not dead:
                break
        self._sweep_at = max(_MIN_SWEEP, 2 * len(pool))
        return dropped

    def _canon(self, value: Any, depth: int, metadata: bool = False) -> tuple[Any, bool]:
        """A canonical equal copy of ``value``, and whether it may be pooled (False: it holds something unique)."""
        kind = type(value)
        if kind is str:
            if len(value) <= self._max:
                value = sys.intern(value)
            return value, True
        if kind is dict or kind is list:
            if depth < 2:
                return self._copy(value, depth, self._metadata_volatile if metadata else self._volatile)
            return self._pooled(value, depth)
        return value, True

    def _pooled(self, value: Any, depth: int) -> tuple[Any, bool]:
        # The serialized form is the sub-tree's identity: orjson writes it in C far faster than Python could walk
        # the tree, a hit then costs one bytes comparison and no walk at all, and it tells 1, 1.0 and true apart.
        try:
            form = _dumps(value)
        except TypeError:  # not JSON (a caller's own object): copy without pooling
            return self._copy(value, depth, self._volatile)[0], False
        h = hash(form)
        entry = self._pool.get(h)
        if entry is not None and entry[0] == form:
            return entry[1], True
        out, poolable = self._copy(value, depth, self._volatile)
        if not poolable:
            return out, False
        if entry is None:
            # Pool a sub-tree only the second time its hash is seen: most sub-trees never repeat, and a pool entry
            # for each would cost more than sharing saves. The doorkeeper is a fixed table, so unique sub-trees
            # cost nothing per object; a slot overwritten before the repeat only delays pooling.
            # Two candidate slots per hash, overwritten at random: two hot sub-trees whose slots collide cannot
            # keep evicting each other forever.
            door = self._door
            first = h & self._door_mask
            second = (h >> 24) & self._door_mask
            if door[first] == h or door[second] == h:
                # A copy: orjson's buffer keeps its spare capacity (4 KiB), which the pool would hold for good.
                self._pool[h] = (bytes(memoryview(form)), out)
            else:
                door[first if self._rng.getrandbits(1) else second] = h
        # A hash collision between different contents (entry not None) just means no sharing for this one.
        return out, True

    def _copy(self, value: Any, depth: int, volatile: frozenset[str]) -> tuple[Any, bool]:
        """A copy with canonical children; poolable unless a volatile value sits somewhere inside."""
        # Scalars are handled inline rather than through _canon: they are most of the nodes, and a call each
        # would cost more than the rest of the walk.
        poolable = depth >= 2
        intern = sys.intern
        longest = self._max
        child = depth + 1
        if type(value) is list:
            items: list[Any] = []
            append = items.append
            for v in value:
                kind = type(v)
                if kind is str:
                    append(intern(v) if len(v) <= longest else v)
                elif kind is dict or kind is list:
                    cv, ok = self._pooled(v, child) if child >= 2 else self._copy(v, child, self._volatile)
                    append(cv)
                    poolable = poolable and ok
                else:
                    append(v)
            return items, poolable
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if type(k) is str:
                k = intern(k)
            kind = type(v)
            if kind is dict or kind is list:
                if child >= 2:
                    cv, ok = self._pooled(v, child)
                else:
                    metadata = depth == 0 and k == "metadata"
                    cv, ok = self._copy(v, child, self._metadata_volatile if metadata else self._volatile)
                out[k] = cv
                poolable = poolable and ok
            elif k in volatile and v is not None:
                out[k] = v
                poolable = False
            elif kind is str:
                out[k] = intern(v) if len(v) <= longest else v
            else:
                out[k] = v
        return out, poolable


# -- the pod projection ---------------------------------------------------------------------------------
#
# Pods are most of what a controller manager caches, and much of a pod is for the kubelet alone. What the
# controllers in controller_manager/controllers read of a cached pod (grepped; keep this list current when a
# controller starts reading more): metadata (all of it but managedFields); spec.nodeName, restartPolicy,
# tolerations, terminationGracePeriodSeconds, nodeSelector, affinity, hostNetwork, priority and the rest of the
# scalars; of each container only its name (pod failure policies and sidecar restart counts match on it, with
# initContainers' restartPolicy), plus image and resources for whoever reports them; status.phase, conditions,
# reason, message, hostIP, podIP, startTime, qosClass, and the containers' statuses (state, lastState, ready,
# restartCount, started). Dropped: spec.volumes, every other container field (env, ports, probes, mounts,
# command, ...), status.podIPs/hostIPs (podIP/hostIP stay), and containers' containerID/imageID (unique per pod
# and read by nobody). The projected pod must never be written back whole (no controller updates a pod from its
# cache: they patch), so what is dropped here is never lost on the server.
_POD_CONTAINER_KEEP: frozenset[str] = frozenset({"name", "image", "resources", "restartPolicy"})
_POD_STATUS_DROP: frozenset[str] = frozenset({"podIPs", "hostIPs"})
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def _project_containers(containers: Any) -> Any:
    if type(containers) is not list:
        return containers
    keep = _POD_CONTAINER_KEEP
    return [{k: v for k, v in c.items() if k in keep} if type(c) is dict else c for c in containers]


def _project_container_statuses(statuses: Any) -> Any:
    if type(statuses) is not list:
        return statuses
    out = []
    for c in statuses:
        if type(c) is dict and ("containerID" in c or "imageID" in c):
            c = dict(c)
            c.pop("containerID", None)
            c.pop("imageID", None)
        out.append(c)
    return out


def project_pod(obj: Obj) -> Obj:
    """A pod with what no controller reads dropped (see the list above); other kinds are returned as they are."""
    if obj.get("kind") != "Pod":
        return obj
    out = dict(obj)
    spec = obj.get("spec")
    if type(spec) is dict:
        spec = out["spec"] = dict(spec)
        spec.pop("volumes", None)
        for key in _CONTAINER_LISTS:
            if key in spec:
                spec[key] = _project_containers(spec[key])
    status = obj.get("status")
    if type(status) is dict:
        status = out["status"] = dict(status)
        for key in _POD_STATUS_DROP:
            status.pop(key, None)
        for key in _CONTAINER_STATUS_LISTS:
            if key in status:
                status[key] = _project_container_statuses(status[key])
    return out


_DEFAULT_SHARER = Sharer()


def share(obj: Obj) -> Obj:
    """Share ``obj``'s repeated strings and sub-trees with everything cached so far (process-wide pool)."""
    return _DEFAULT_SHARER.share(obj)


def default_transform(obj: Obj) -> Obj:
    return share(project_pod(strip_managed_fields(obj)))
