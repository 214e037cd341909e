"""An in-memory API for driving :class:`StatefulSetControl` sync by sync, as upstream's control tests drive theirs
with fake pod/claim/revision managers: pods appear Pending when created, tests make them Running and Ready."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller_manager.api.meta import format_time
from controller_manager.api.resources import CONTROLLERREVISIONS, PERSISTENTVOLUMECLAIMS, PODS, STATEFULSETS, Resource
from controller_manager.api.selectors import from_label_selector
from controller_manager.client.errors import AlreadyExists, Conflict, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.statefulset.control import StatefulSetControl
from controller_manager.controllers.statefulset.history import History
from controller_manager.controllers.statefulset.pod_control import StatefulPodControl
from controller_manager.controllers.statefulset.status import StatefulSetStatus, StatusUpdater

NS = "default"
LABELS = {"app": "web"}


def new_stateful_set(replicas: int = 3, *, name: str = "web", policy: str = "OrderedReady",
                     strategy: dict[str, Any] | None = None, claims: tuple[str, ...] = ("data",),
                     history_limit: int = 10, min_ready: int = 0, start: int | None = None,
                     retention: tuple[str, str] | None = None, image: str = "nginx:1") -> dict[str, Any]:
    """A StatefulSet as the API server returns it (defaults applied)."""
    spec: dict[str, Any] = {
        "replicas": replicas, "serviceName": "web", "podManagementPolicy": policy,
        "selector": {"matchLabels": LABELS},
        "updateStrategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "revisionHistoryLimit": history_limit, "minReadySeconds": min_ready,
        "template": {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "nginx", "image": image}]}},
        "volumeClaimTemplates": [{"metadata": {"name": c}, "spec": {"accessModes": ["ReadWriteOnce"]}}
                                 for c in claims],
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": (retention or ("Retain", "Retain"))[0],
                                                 "whenScaled": (retention or ("Retain", "Retain"))[1]},
    }
    if start is not None:
        spec["ordinals"] = {"start": start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid", "generation": 1,
                         "resourceVersion": "1"}, "spec": spec}


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Any, type_: str, reason: str, message: str, resource: Any = None) -> None:
        self.events.append((type_, reason, message))


class FakeApi:
    """Just enough of ApiClient for the StatefulSet control: objects by (plural, namespace, name)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)
        self.fail: dict[tuple[str, str], Exception] = {}  # (verb, plural) -> error to raise once
        self.calls: list[tuple[str, str, str]] = []

    def _key(self, res: Resource, name: str, namespace: str | None) -> tuple[str, str, str]:
        return res.plural, namespace or "", name

    def _maybe_fail(self, verb: str, res: Resource) -> None:
        err = self.fail.pop((verb, res.plural), None)
        if err is not None:
            raise err

    def list(self, res: Resource) -> list[dict[str, Any]]:
        return [o for (plural, _, _), o in sorted(self.objects.items()) if plural == res.plural]

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self._maybe_fail("create", res)
        obj = copy.deepcopy(obj)
        m = obj.setdefault("metadata", {})
        key = self._key(res, m["name"], namespace or m.get("namespace"))
        self.calls.append(("create", res.plural, m["name"]))
        if key in self.objects:
            raise AlreadyExists(409, "AlreadyExists", f'{res.plural} "{m["name"]}" already exists')
        m["namespace"] = key[1]
        m["uid"] = f"uid-{next(self._uid)}"
        m["resourceVersion"] = str(next(self._rv))
        m["creationTimestamp"] = format_time(self.clock.now())
        if res.kind == "Pod":
            obj["status"] = {"phase": "Pending"}
        self.objects[key] = obj
        return copy.deepcopy(obj)

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        try:
            return copy.deepcopy(self.objects[self._key(res, name, namespace)])
        except KeyError:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found') from None

    async def update(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("update", res)
        m = obj["metadata"]
        key = self._key(res, m["name"], m.get("namespace"))
        self.calls.append(("update", res.plural, m["name"]))
        current = self.objects.get(key)
        if current is None:
            raise NotFound(404, "NotFound", "not found")
        if current["metadata"]["resourceVersion"] != m.get("resourceVersion"):
            raise Conflict(409, "Conflict", "the object has been modified")
        new = copy.deepcopy(dict(obj))
        new["metadata"] = {**new["metadata"], "resourceVersion": str(next(self._rv))}
        self.objects[key] = new
        return copy.deepcopy(new)

    async def update_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("update_status", res)
        current = await self.get(res, obj["metadata"]["name"], obj["metadata"].get("namespace"))
        if current["metadata"]["resourceVersion"] != obj["metadata"].get("resourceVersion"):
            raise Conflict(409, "Conflict", "the object has been modified")
        return await self.update(res, {**current, "status": copy.deepcopy(obj["status"])})

    async def patch(self, res: Resource, name: str, patch: dict[str, Any], namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        self._maybe_fail("patch", res)
        self.calls.append(("patch", res.plural, name))
        key = self._key(res, name, namespace)
        current = self.objects.get(key)
        if current is None:
            raise NotFound(404, "NotFound", "not found")
        m = current["metadata"]
        pm = patch.get("metadata") or {}
        if "labels" in pm:
            m["labels"] = {**(m.get("labels") or {}), **pm["labels"]}
        if "ownerReferences" in pm:
            m["ownerReferences"] = [r for r in pm["ownerReferences"] if "$patch" not in r]
        m["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(current)

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None,
                     **_: Any) -> dict[str, Any]:
        self._maybe_fail("delete", res)
        self.calls.append(("delete", res.plural, name))
        key = self._key(res, name, namespace)
        current = self.objects.pop(key, None)
        if current is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return current


@dataclass
class _Store:
    api: FakeApi
    res: Resource

    def by_index(self, name: str, value: str) -> list[dict[str, Any]]:
        return [o for o in self.api.list(self.res) if o["metadata"].get("namespace") == value]


@dataclass
class _Informer:
    store: _Store


@dataclass
class Cluster:
    """A StatefulSet, its control and the fake API; ``sync()`` runs one UpdateStatefulSet."""

    clock: FakeClock = field(default_factory=FakeClock)
    api: FakeApi = field(init=False)
    recorder: FakeRecorder = field(default_factory=FakeRecorder)
    control: StatefulSetControl = field(init=False)

    def __post_init__(self) -> None:
        self.api = FakeApi(self.clock)
        api = self.api
        self.pod_control = StatefulPodControl(
            api, self.recorder,  # type: ignore[arg-type]
            lambda ns, name: api.objects.get((PERSISTENTVOLUMECLAIMS.plural, ns, name)))
        history = History(api, _Informer(_Store(api, CONTROLLERREVISIONS)))  # type: ignore[arg-type]
        self.control = StatefulSetControl(self.pod_control, StatusUpdater(api),  # type: ignore[arg-type]
                                          history, self.clock, structlog.get_logger("test"))

    # --- driving it ---------------------------------------------------------------------------------

    async def create(self, sts: dict[str, Any]) -> None:
        self.api.objects[(STATEFULSETS.plural, NS, sts["metadata"]["name"])] = copy.deepcopy(sts)

    def set(self, name: str = "web") -> dict[str, Any]:
        return self.api.objects[(STATEFULSETS.plural, NS, name)]

    def edit_spec(self, name: str = "web", **changes: Any) -> None:
        sts = self.set(name)
        sts["spec"] = {**sts["spec"], **changes}
        sts["metadata"]["generation"] += 1
        sts["metadata"]["resourceVersion"] = str(next(self.api._rv))

    def set_image(self, image: str, name: str = "web") -> None:
        template = copy.deepcopy(self.set(name)["spec"]["template"])
        template["spec"]["containers"][0]["image"] = image
        self.edit_spec(name, template=template)

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.api.list(PODS)}

    def names(self) -> list[str]:
        return sorted(self.pods(), key=lambda n: int(n.rsplit("-", 1)[1]))

    def claims(self) -> dict[str, dict[str, Any]]:
        return {c["metadata"]["name"]: c for c in self.api.list(PERSISTENTVOLUMECLAIMS)}

    def revisions(self) -> list[dict[str, Any]]:
        return sorted(self.api.list(CONTROLLERREVISIONS), key=lambda r: r["revision"])

    async def sync(self, name: str = "web") -> StatefulSetStatus:
        sts = copy.deepcopy(self.set(name))
        selector = from_label_selector(sts["spec"]["selector"])
        pods = [copy.deepcopy(p) for p in self.pods().values()]
        return await self.control.update_stateful_set(sts, selector, pods)

    def make_ready(self, name: str, *, ready_since: float | None = None) -> None:
        pod = self.api.objects[(PODS.plural, NS, name)]
        since = format_time(self.clock.now() if ready_since is None else ready_since)
        pod["status"] = {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": since}]}

    def make_all_ready(self) -> None:
        for name, pod in self.pods().items():
            if pod["status"].get("phase") == "Pending":
                self.make_ready(name)

    def set_phase(self, name: str, phase: str) -> None:
        self.api.objects[(PODS.plural, NS, name)]["status"] = {"phase": phase}

    def mark_terminating(self, name: str) -> None:
        self.api.objects[(PODS.plural, NS, name)]["metadata"]["deletionTimestamp"] = format_time(self.clock.now())

    def remove_pod(self, name: str) -> None:
        del self.api.objects[(PODS.plural, NS, name)]

    async def settle(self, *, max_syncs: int = 100) -> StatefulSetStatus:
        """Sync, making new pods ready each time, until a sync changes nothing."""
        status = await self.sync()
        for _ in range(max_syncs):
            before = len(self.api.calls)
            self.make_all_ready()
            status = await self.sync()
            if len(self.api.calls) == before and all(
                    p["status"].get("phase") == "Running" for p in self.pods().values()):
                return status
        raise AssertionError("did not settle")
