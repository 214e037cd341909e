"""From a pod's controller reference to the controller and its scale (``disruption.go``'s finders).

Guarantees:
- :meth:`Finders.find` asks, in upstream's order, the ReplicationController, Deployment (through the pod's
  ReplicaSet), ReplicaSet (one no Deployment controls), StatefulSet and generic ``/scale`` finders; the first that
  knows the reference answers ``(controller uid, spec.replicas)``. A finder answers None when the reference is
  not of its kind or group, or the object it names is not cached with that UID.
- The workload finders read only the informer caches. The ReplicationController finder answers only when the
  controller was given an RC store (kube-sim serves no ReplicationControllers); otherwise RCs are found through
  ``/scale`` like any other kind, as a real API server serves it for them.
- The ``/scale`` finder maps the reference's group/version/kind to a resource (built-in table first, then
  discovery, refreshed on a miss at most every :data:`DISCOVERY_RESET_PERIOD` seconds as kube-controller-manager
  resets its RESTMapper), GETs the Scale and answers if its UID matches. A 404 is "no such controller" when the
  group/version lists the resource's ``scale`` subresource as an autoscaling Scale, and an error
  (``<resource> does not implement the scale subresource``) otherwise. Unmappable kinds and failed requests raise
  :class:`FinderError` with upstream's wording.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from controller_manager.api.meta import controller_ref
from controller_manager.api.resources import Resource, for_kind
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.clock import Clock

if TYPE_CHECKING:
    from controller_manager.client import ApiClient
    from controller_manager.runtime.informers import Store

__all__ = [
    "DISCOVERY_RESET_PERIOD",
    "REPLICATIONCONTROLLERS",
    "SCALE_VERSIONS",
    "ControllerAndScale",
    "FinderError",
    "Finders",
    "KindMapper",
    "parse_group_version",
    "verify_group_kind",
]

Obj = Mapping[str, Any]

# Not in the shared table: kube-sim does not serve ReplicationControllers. A controller that watches them (a real
# cluster) builds its informer on this descriptor.
REPLICATIONCONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController", True, ("rc",),
                                  ("status", "scale"), categories=("all",))

# How often kube-controller-manager resets its discovery-backed RESTMapper.
DISCOVERY_RESET_PERIOD = 30.0

# The group/versions a Scale subresource may be served in (client-go's scale converter).
SCALE_VERSIONS: tuple[tuple[str, str], ...] = (
    ("autoscaling", "v1"), ("extensions", "v1beta1"), ("apps", "v1beta1"), ("apps", "v1beta2"))


class FinderError(Exception):
    """A controller reference that could not be resolved; the message is upstream's."""


class ControllerAndScale(NamedTuple):
    uid: str
    scale: int


Finder = Callable[[Mapping[str, Any], str], Awaitable[ControllerAndScale | None]]


def parse_group_version(api_version: str) -> tuple[str, str]:
    """``(group, version)`` as ``schema.ParseGroupVersion`` splits it; FinderError for more than one slash."""
    if not api_version or api_version == "/":
        return "", ""
    slashes = api_version.count("/")
    if slashes == 0:
        return "", api_version
    if slashes == 1:
        group, _, version = api_version.partition("/")
        return group, version
    raise FinderError(f"unexpected GroupVersion string: {api_version}")


def verify_group_kind(ref: Mapping[str, Any], expected_kind: str, expected_groups: Sequence[str]) -> bool:
    """The reference is of ``expected_kind`` in one of ``expected_groups``."""
    group, _ = parse_group_version(str(ref.get("apiVersion") or ""))
    return ref.get("kind") == expected_kind and group in expected_groups


def _replicas(obj: Obj) -> int:
    replicas = (obj.get("spec") or {}).get("replicas", 1)  # the API defaults a missing count to 1
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class KindMapper:
    """group/version/kind -> Resource: the built-in table, then a discovery snapshot (``RESTMapping``)."""

    def __init__(self, client: ApiClient, clock: Clock) -> None:
        self._client = client
        self._clock = clock
        self._discovered: dict[tuple[str, str, str], Resource] | None = None
        self._discovered_at = 0.0

    async def resource_for(self, group: str, version: str, kind: str) -> Resource:
        api_version = f"{group}/{version}" if group else version
        builtin = for_kind(api_version, kind)
        if builtin is not None:
            return builtin
        key = (group, version, kind)
        stale = self._discovered is None or self._clock.monotonic() - self._discovered_at >= DISCOVERY_RESET_PERIOD
        if (self._discovered is None or key not in self._discovered) and stale:
            await self._refresh()
        found = (self._discovered or {}).get(key)
        if found is None:
            raise FinderError(f'no matches for kind "{kind}" in version "{api_version}"')
        return found

    async def _refresh(self) -> None:
        try:
            resources = await self._client.discover()
        except ApiError as err:
            raise FinderError(str(err)) from err
        self._discovered = {(r.group, r.version, r.kind): r for r in resources if "/" not in r.plural}
        self._discovered_at = self._clock.monotonic()


class Finders:
    """The pod-controller finders over the controller's caches (stores may be absent: that finder never answers)."""

    def __init__(self, client: ApiClient, mapper: KindMapper, *, rs: Store, deployments: Store, statefulsets: Store,
                 rc: Store | None = None) -> None:
        self._client = client
        self._mapper = mapper
        self._rs = rs
        self._deployments = deployments
        self._statefulsets = statefulsets
        self._rc = rc

    def finders(self) -> list[Finder]:
        """Upstream's order: cheap cache lookups first, the ``/scale`` GET last."""
        return [self.replication_controller, self.deployment, self.replica_set, self.stateful_set,
                self.scale_controller]

    async def find(self, ref: Mapping[str, Any], namespace: str) -> ControllerAndScale | None:
        for finder in self.finders():
            found = await finder(ref, namespace)
            if found is not None:
                return found
        return None

    @staticmethod
    def _cached(store: Store | None, namespace: str, ref: Mapping[str, Any]) -> Obj | None:
        if store is None:
            return None
        obj = store.get(f"{namespace}/{ref.get('name') or ''}")
        if obj is None or _uid(obj) != ref.get("uid"):
            return None
        return obj

    async def replica_set(self, ref: Mapping[str, Any], namespace: str) -> ControllerAndScale | None:
        """A ReplicaSet that no Deployment controls."""
        if not verify_group_kind(ref, "ReplicaSet", ("apps", "extensions")):
            return None
        rs = self._cached(self._rs, namespace, ref)
        if rs is None:
            return None
        owner = controller_ref(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            return None  # the Deployment finder counts it
        return ControllerAndScale(_uid(rs), _replicas(rs))

    async def stateful_set(self, ref: Mapping[str, Any], namespace: str) -> ControllerAndScale | None:
        if not verify_group_kind(ref, "StatefulSet", ("apps",)):
            return None
        ss = self._cached(self._statefulsets, namespace, ref)
        return None if ss is None else ControllerAndScale(_uid(ss), _replicas(ss))

    async def deployment(self, ref: Mapping[str, Any], namespace: str) -> ControllerAndScale | None:
        """The Deployment controlling the pod's ReplicaSet."""
        if not verify_group_kind(ref, "ReplicaSet", ("apps", "extensions")):
            return None
        rs = self._cached(self._rs, namespace, ref)
        if rs is None:
            return None
        owner = controller_ref(rs)
        if owner is None or not verify_group_kind(owner, "Deployment", ("apps", "extensions")):
            return None
        deployment = self._cached(self._deployments, namespace, owner)
        return None if deployment is None else ControllerAndScale(_uid(deployment), _replicas(deployment))

    async def replication_controller(self, ref: Mapping[str, Any], namespace: str) -> ControllerAndScale | None:
        if not verify_group_kind(ref, "ReplicationController", ("",)):
            return None
        rc = self._cached(self._rc, namespace, ref)
        return None if rc is None else ControllerAndScale(_uid(rc), _replicas(rc))

    async def scale_controller(self, ref: Mapping[str, Any], namespace: str) -> ControllerAndScale | None:
        """Any kind serving ``/scale`` (custom resources, and RCs when they are not watched)."""
        group, version = parse_group_version(str(ref.get("apiVersion") or ""))
        res = await self._mapper.resource_for(group, version, str(ref.get("kind") or ""))
        try:
            scale = await self._client.get_scale(res, str(ref.get("name") or ""), namespace)
        except NotFound:
            # Either the object does not exist or its kind has no scale subresource: tell them apart.
            if not await self._implements_scale(res):
                raise FinderError(f"{res.group_resource} does not implement the scale subresource") from None
            return None
        except ApiError as err:
            raise FinderError(str(err)) from err
        if _uid(scale) != ref.get("uid"):
            return None
        spec_replicas = (scale.get("spec") or {}).get("replicas", 0)
        return ControllerAndScale(_uid(scale), spec_replicas if isinstance(spec_replicas, int) else 0)

    async def _implements_scale(self, res: Resource) -> bool:
        try:
            doc = await self._client.request("GET", res.base_path())
        except ApiError as err:
            raise FinderError(str(err)) from err
        wanted = f"{res.plural}/scale"
        entries = (doc.get("resources") if isinstance(doc, Mapping) else None) or ()
        for entry in entries:
            if not isinstance(entry, Mapping) or entry.get("name") != wanted:
                continue
            if entry.get("kind") == "Scale" and (entry.get("group"), entry.get("version")) in SCALE_VERSIONS:
                return True
        return False
