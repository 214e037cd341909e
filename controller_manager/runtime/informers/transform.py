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
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from controller_manager.api.jsonbytes import kept

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]

_dumps = orjson.dumps

# Keys whose scalar values are (nearly) unique per object: interning or pooling them would only cost memory.
VOLATILE_KEYS: frozenset[str] = frozenset(
    {"resourceVersion", "containerID", "renewTime", "lastHeartbeatTime", "podIP"})

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
        # a JSON text -> the one shared sub-tree it decodes to. Usually the text is orjson's serialization of the
        # sub-tree; the wire decoder (wire.py) also files sub-trees under the text the server sent. Either way the
        # text determines the value, so a hit is always correct; one value may sit under two texts.
        self._pool: dict[bytes, Any] = {}
        self._sweep_at = _MIN_SWEEP
        self._door = array("q", bytes(8 * _DOOR_SLOTS))
        self._door_mask = _DOOR_SLOTS - 1

    def __len__(self) -> int:
        return len(self._pool)

    @property
    def pool(self) -> dict[bytes, Any]:
        """JSON text -> shared sub-tree; the wire decoder reads it directly (a lookup per field, no call)."""
        return self._pool

    def share(self, obj: Obj) -> Obj:
        out, _ = self._canon(obj, 0)
        result: Obj = out
        self.maybe_sweep()
        return result

    def canonical(self, value: Any, form: bytes | None = None) -> Any:
        """The shared equal copy of ``value``, a field's value inside a section (``spec.tolerations``, ...).

        ``form``, when given, is a JSON text that decodes to ``value`` (the bytes the server sent)."""
        if type(value) is dict or type(value) is list:
            return self._pooled(value, 2, form)[0]
        return self._canon(value, 2)[0]

    def canonical_scalar(self, value: Any, form: bytes) -> Any:
        """A string, number, boolean or null (``form``: its JSON text), interned and pooled like a sub-tree, so
        a repeat is one lookup of its text in :attr:`pool`."""
        if type(value) is str:
            value = sys.intern(value)
        self._admit(form, value)
        return value

    def maybe_sweep(self) -> None:
        if len(self._pool) >= self._sweep_at:
            self.sweep()

    def sweep(self) -> int:
        """Forget pooled sub-trees nothing else holds; returns how many were dropped (CPython refcounts).

        Besides sub-trees whose objects left the cache, this drops the rare entry pooled as a child of a
        candidate that then matched an older pooled parent (whose own child is an equal, earlier copy).
        """
        pool = self._pool
        dropped = 0
        # A pooled parent keeps its pooled children alive, so dropping parents can free children: repeat.
        while True:
            # A value filed under n texts is unused when those n entries, the loop variable and getrefcount's
            # argument are all that refer to it.
            entries = Counter(map(id, pool.values()))
            dead = []
            tree: Any = None
            for text in list(pool):
                tree = pool[text]
                if sys.getrefcount(tree) <= entries[id(tree)] + 2:
                    dead.append(text)
            tree = None  # so the last one looked at is not kept alive through the next round
            for text in dead:
                del pool[text]
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

    def _pooled(self, value: Any, depth: int, form: bytes | None = None) -> tuple[Any, bool]:
        """``form``, when given, is a JSON text of ``value`` (what the server sent); else orjson writes one."""
        # The serialized form is the sub-tree's identity: orjson writes it in C far faster than Python could walk
        # the tree, a hit then costs one dict lookup and no walk at all, and it tells 1, 1.0 and true apart.
        if form is None:
            try:
                form = _dumps(value)
            except TypeError:  # not JSON (a caller's own object): copy without pooling
                return self._copy(value, depth, self._volatile)[0], False
        entry = self._pool.get(form)
        if entry is not None:
            return entry, True
        out, poolable = self._copy(value, depth, self._volatile)
        if not poolable:
            return out, False
        self._admit(form, out)
        return out, True

    def _admit(self, form: bytes, value: Any) -> None:
        """Pool ``value`` under ``form`` the second time the form's hash is seen."""
        # Pool a sub-tree only the second time its hash is seen: most sub-trees never repeat, and a pool entry
        # for each would cost more than sharing saves. The doorkeeper is a fixed table, so unique sub-trees
        # cost nothing per object; a slot overwritten before the repeat only delays pooling.
        # Two candidate slots per hash, overwritten at random: two hot sub-trees whose slots collide cannot
        # keep evicting each other forever.
        h = hash(form)
        door = self._door
        first = h & self._door_mask
        second = (h >> 24) & self._door_mask
        if door[first] == h or door[second] == h:
            # A copy: orjson's buffer keeps its spare capacity (4 KiB), which the pool would hold for good.
            self._pool[kept(form)] = value
        else:
            door[first if self._rng.getrandbits(1) else second] = h

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
# scalars; of each container its name (pod failure policies and sidecar restart counts match on it, with
# initContainers' restartPolicy) and ports (EndpointSlices resolve named target ports), plus image and resources
# for whoever reports them; status.phase, conditions, reason, message, hostIP, podIP, startTime, qosClass, and of
# the containers' statuses their name, state, lastState, ready, restartCount, started, image, and the resources and
# allocatedResources the kubelet reports (the quota controller charges a resized pod by them). Dropped:
# of spec.volumes only the entries naming a claim or a CSI driver (persistentVolumeClaim, ephemeral, csi: the volume
# controllers find a pod's claims and CSI volumes by them), each reduced to its name and that source; the other
# volumes, every other container field (env, probes, mounts, command, ...), status.podIPs and hostIPs when
# they hold one address (the API server keeps podIPs[0] equal to podIP and hostIPs[0] to hostIP, so a single
# entry says nothing more; dual-stack lists are kept: read ``api.pods.pod_ips``), and every other container status field
# (containerID and imageID, unique per pod; mounts, user, ...). The projected pod must never
# be written back whole (no controller updates a pod from its cache: they patch), so what is dropped here is never
# lost on the server.
POD_CONTAINER_KEEP: frozenset[str] = frozenset({"name", "image", "resources", "restartPolicy", "ports"})
POD_CONTAINER_STATUS_KEEP: frozenset[str] = frozenset(
    {"name", "state", "lastState", "ready", "restartCount", "started", "image", "resources", "allocatedResources"})
POD_SPEC_DROP: frozenset[str] = frozenset()
POD_VOLUME_SOURCES_KEEP: frozenset[str] = frozenset({"persistentVolumeClaim", "ephemeral", "csi"})
POD_STATUS_IP_LISTS: frozenset[str] = frozenset({"podIPs", "hostIPs"})  # dropped when single (see above)
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
CONTAINER_STATUS_LISTS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def project_containers(containers: Any) -> Any:
    if type(containers) is not list:
        return containers
    keep = POD_CONTAINER_KEEP
    return [{k: v for k, v in c.items() if k in keep} if type(c) is dict else c for c in containers]


def project_container_statuses(statuses: Any) -> Any:
    if type(statuses) is not list:
        return statuses
    keep = POD_CONTAINER_STATUS_KEEP
    return [{k: v for k, v in c.items() if k in keep} if type(c) is dict else c for c in statuses]


def project_volumes(volumes: Any) -> Any:
    """A pod's volumes as the projection keeps them: those with a kept source, each with its name and that source;
    None when no volume is kept (the field is then left out)."""
    if type(volumes) is not list:
        return volumes
    keep = POD_VOLUME_SOURCES_KEEP
    kept = [{k: v for k, v in vol.items() if k == "name" or k in keep} for vol in volumes
            if type(vol) is dict and any(k in vol for k in keep)]
    return kept or None


def single_address(ips: Any) -> bool:
    """A pod's podIPs or hostIPs that repeat the one address podIP/hostIP already holds (or hold none)."""
    return type(ips) is list and len(ips) <= 1


def project_pod(obj: Obj) -> Obj:
    """A pod with what no controller reads dropped (see the list above); other kinds are returned as they are."""
    if obj.get("kind") != "Pod":
        return obj
    out = dict(obj)
    spec = obj.get("spec")
    if type(spec) is dict:
        spec = out["spec"] = {k: v for k, v in spec.items() if k not in POD_SPEC_DROP}
        for key in CONTAINER_LISTS:
            if key in spec:
                spec[key] = project_containers(spec[key])
        if type(spec.get("volumes")) is list:
            volumes = project_volumes(spec["volumes"])
            if volumes is None:
                del spec["volumes"]
            else:
                spec["volumes"] = volumes
    status = obj.get("status")
    if type(status) is dict:
        status = out["status"] = {k: v for k, v in status.items()
                                  if k not in POD_STATUS_IP_LISTS or not single_address(v)}
        for key in CONTAINER_STATUS_LISTS:
            if key in status:
                status[key] = project_container_statuses(status[key])
    return out


_DEFAULT_SHARER = Sharer()


def default_sharer() -> Sharer:
    """The process-wide sharer behind :func:`share` and the default transform."""
    return _DEFAULT_SHARER


def share(obj: Obj) -> Obj:
    """Share ``obj``'s repeated strings and sub-trees with everything cached so far (process-wide pool)."""
    return _DEFAULT_SHARER.share(obj)


def default_transform(obj: Obj) -> Obj:
    return share(project_pod(strip_managed_fields(obj)))
