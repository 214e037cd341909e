"""ShardGate: which keys a member may sync, and the drain acknowledgement, on caches filled by hand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import structlog

from controller_manager.api.resources import DEPLOYMENTS, JOBS, PODS, REPLICASETS, Resource
from controller_manager.clock import RealClock
from controller_manager.controllerutil.pod_control import pod_from_template
from controller_manager.controllerutil.sharding import ShardGate, Verdict, inherit_shard_labels
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.sharding.membership import PREVIOUS_ANNOTATION, drain_label, shard_label
from controller_manager.runtime.workqueue import RateLimitingQueue

RING = "r"
LABEL = shard_label(RING)
DRAIN = drain_label(RING)


class Patches:
    """The gate's client: records patches."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    async def patch(self, res: Resource, name: str, patch: dict[str, Any], namespace: str | None = None, *,
                    patch_type: str = "merge") -> dict[str, Any]:
        self.sent.append((res.plural, name, patch))
        return {}


class Expectations:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete_expectations(self, key: str) -> None:
        self.deleted.append(key)


class FakeController:
    def __init__(self) -> None:
        self.expectations = Expectations()


def obj(kind: Resource, name: str, uid: str, *, labels: dict[str, str] | None = None,
        owner: tuple[Resource, str, str] | None = None, annotations: dict[str, str] | None = None,
        rv: str = "5") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
                                "labels": labels or {}}
    if owner is not None:
        res, oname, ouid = owner
        metadata["ownerReferences"] = [{"apiVersion": res.api_version, "kind": res.kind, "name": oname,
                                        "uid": ouid, "controller": True}]
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}


MINE = {LABEL: "m1"}
DEPLOY = obj(DEPLOYMENTS, "web", "d-1", labels=MINE)
RS = obj(REPLICASETS, "web-abc", "rs-1", labels=MINE, owner=(DEPLOYMENTS, "web", "d-1"))
POD = obj(PODS, "web-abc-x", "p-1", labels=MINE, owner=(REPLICASETS, "web-abc", "rs-1"))


class Setup:
    def __init__(self, owner_grace: float = 30.0) -> None:
        self.factory = SharedInformerFactory(client=None, clock=RealClock())  # type: ignore[arg-type]  # never run
        self.client = Patches()
        self.gate = ShardGate(ring=RING, member="m1", informers=self.factory, client=self.client,  # type: ignore[arg-type]
                              clock=RealClock(), log=structlog.get_logger("test"), owner_grace=owner_grace)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue("rs")
        self.controller = FakeController()
        self.rs_admission = self.gate.admission(self.controller, REPLICASETS)
        self.job_admission = self.gate.admission(object(), JOBS, {"pod:": PODS})

    def fill(self, res: Resource, *items: dict[str, Any], rv: str = "10") -> None:
        """What a reflector's list does: the cache replaced, the watch to start from ``rv``."""
        informer = self.factory.informer(res)
        informer.replace([dict(i) for i in items], rv)
        informer._reflector._rv = rv


async def until(check: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    s = Setup()
    yield s
    s.queue.shut_down()


async def test_a_key_syncs_only_when_its_root_is_cached_mine_and_not_draining(setup: Setup) -> None:
    setup.fill(REPLICASETS, RS)
    setup.fill(PODS, POD)
    assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.OWNER_MISSING  # the Deployment is not here yet
    assert setup.gate.verdict(PODS, "ns/web-abc-x") is Verdict.OWNER_MISSING
    setup.fill(DEPLOYMENTS, DEPLOY)
    assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.ALLOW
    assert setup.gate.verdict(PODS, "ns/web-abc-x") is Verdict.ALLOW
    assert setup.gate.verdict(REPLICASETS, "ns/gone") is Verdict.ALLOW  # not cached: its sync only cleans up
    setup.fill(DEPLOYMENTS, obj(DEPLOYMENTS, "web", "d-1", labels={**MINE, DRAIN: "true"}, rv="6"))
    assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.WAIT
    setup.fill(DEPLOYMENTS, obj(DEPLOYMENTS, "web", "d-other", labels=MINE))  # same name, another object
    assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.OWNER_MISSING


async def test_a_root_waits_until_the_informers_reach_its_hand_over(setup: Setup) -> None:
    setup.fill(REPLICASETS, RS, rv="30")
    setup.fill(PODS, POD, rv="10")
    setup.fill(DEPLOYMENTS, obj(DEPLOYMENTS, "web", "d-1", labels=MINE,
                                annotations={"sharding.controller-manager.io/handover": "pods=20,replicasets=25"}))
    assert setup.gate.verdict(DEPLOYMENTS, "ns/web") is Verdict.WAIT
    assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.WAIT
    setup.fill(PODS, POD, rv="20")  # the pod watch delivered the relabelled pods
    assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.ALLOW


async def test_refused_keys_are_parked_and_added_back_and_orphans_wait_for_the_grace() -> None:
    setup = Setup(owner_grace=0.3)
    runner = asyncio.create_task(setup.gate.run())
    try:
        setup.fill(REPLICASETS, RS)
        assert not setup.rs_admission.admit(setup.queue, "ns/web-abc")
        assert setup.gate.parked() == 1
        setup.fill(DEPLOYMENTS, DEPLOY)
        await until(lambda: len(setup.queue) > 0)
        assert await setup.queue.get() == "ns/web-abc"
        assert setup.rs_admission.admit(setup.queue, "ns/web-abc")
        setup.rs_admission.release("ns/web-abc")
        setup.queue.done("ns/web-abc")
        assert setup.gate.parked() == 0

        # The job controller's orphan-pod keys name pods: an orphan whose Job never shows up syncs after the grace.
        setup.fill(PODS, obj(PODS, "j-1", "p-9", labels=MINE, owner=(JOBS, "deleted-job", "j-uid")))
        assert not setup.job_admission.admit(setup.queue, "pod:ns/j-1")
        await until(lambda: len(setup.queue) > 0)
        assert await setup.queue.get() == "pod:ns/j-1"
        assert setup.job_admission.admit(setup.queue, "pod:ns/j-1")
        setup.job_admission.release("pod:ns/j-1")
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        setup.queue.shut_down()


async def test_a_drain_waits_for_syncs_in_flight_forgets_expectations_and_names_this_member() -> None:
    setup = Setup(owner_grace=0.1)
    runner = asyncio.create_task(setup.gate.run())
    try:
        setup.fill(DEPLOYMENTS, DEPLOY)
        setup.fill(REPLICASETS, RS)
        setup.fill(PODS, POD)
        assert setup.rs_admission.admit(setup.queue, "ns/web-abc")  # a sync in flight
        setup.fill(DEPLOYMENTS, obj(DEPLOYMENTS, "web", "d-1", labels={**MINE, DRAIN: "true"}, rv="6"))
        assert not setup.rs_admission.admit(setup.queue, "ns/web-abc")  # nothing new starts
        await asyncio.sleep(0.2)
        assert setup.client.sent == []  # not while the sync runs
        setup.rs_admission.release("ns/web-abc")
        await until(lambda: bool(setup.client.sent))
        assert setup.client.sent == [("deployments", "web", {"metadata": {
            "labels": {LABEL: None, DRAIN: None}, "annotations": {PREVIOUS_ANNOTATION: "m1"}}})]
        assert sorted(setup.controller.expectations.deleted) == ["ns/web-abc"]
        # The root left this member (its labels are gone): its dependents never sync here again, even past the
        # grace a deleted owner's orphans get.
        setup.fill(DEPLOYMENTS)
        await asyncio.sleep(0.2)
        assert setup.gate.verdict(REPLICASETS, "ns/web-abc") is Verdict.WAIT
        assert not setup.rs_admission.admit(setup.queue, "ns/web-abc")
        await asyncio.sleep(0.2)
        assert not setup.rs_admission.admit(setup.queue, "ns/web-abc")
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        setup.queue.shut_down()


def test_created_objects_inherit_only_the_owners_shard_labels() -> None:
    owner = obj(REPLICASETS, "web-abc", "rs-1", labels={LABEL: "m1", "app": "web", "other": "x"})
    assert inherit_shard_labels(owner, {"app": "web"}) == {"app": "web", LABEL: "m1"}
    assert inherit_shard_labels(obj(REPLICASETS, "a", "u"), {"app": "web"}) == {"app": "web"}
    assert inherit_shard_labels(obj(REPLICASETS, "a", "u"), None) is None
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}
    assert pod_from_template(template, owner, None)["metadata"]["labels"] == {"app": "web", LABEL: "m1"}
    assert template["metadata"]["labels"] == {"app": "web"}  # the template is not touched
