"""Sharding in-process: the sharder and shard members (each with its own Lease, label-selected informers, the
gate and the deployment and replicaset controllers) against an in-process kube-sim, as replicas run them.

- The work spreads over the members, dependents carry their root's label from creation.
- A member that joins gets roots by draining: the old member acknowledges (labels removed, itself named),
  then the sharder relabels the dependents and the root.
- A member that crashes (its Lease left to expire) is fenced by the sharder (its Lease taken over) and its
  roots move at once.
- No duplicate: the pods created (kube-sim's audit log) are exactly the final replicas, none is deleted.
- A member that also leads serves its shard's informers from the cluster-wide caches (views): one copy of each
  object, and the same guarantees.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller_manager.api.resources import DEPLOYMENTS, LEASES, PODS, REPLICASETS
from controller_manager.client import ApiClient, NotFound
from controller_manager.clock import Clock
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.replicaset import ReplicaSetController
from controller_manager.controllers.sharder import Sharder
from controller_manager.controllerutil.sharding import ShardGate
from controller_manager.runtime.controller import Controller, ControllerContext, run_controller
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.leaderelection import LeaderElector, LeadershipLost
from controller_manager.runtime.sharding.kinds import is_sharded
from controller_manager.runtime.sharding.membership import (
    PREVIOUS_ANNOTATION,
    SHARDER_IDENTITY,
    drain_label,
    shard_label,
    shard_lease_config,
)
from tests.controllers.harness import Harness, controller_harness, wait_for

RING = "test-ring"
NS = "kube-system"
LABEL = shard_label(RING)
DRAIN = drain_label(RING)
OPTIONS = {"sharding_ring_name": RING, "leader_elect_resource_namespace": NS}


class Member:
    """One replica's sharded half: shard Lease, selected informers, gate, deployment + replicaset controllers."""

    def __init__(self, client: ApiClient, clock: Clock, name: str, *, release_on_stop: bool = True) -> None:
        self.name = name
        config = shard_lease_config(RING, name, namespace=NS, lease_duration=2.0, renew_deadline=1.5,
                                    retry_period=0.25)
        self.elector = LeaderElector(client, dataclasses.replace(config, release_on_cancel=release_on_stop),
                                     clock, rng=random.Random(0))
        selector = f"{LABEL}={name}"
        self.factory = SharedInformerFactory(client, clock,
                                             selector_for=lambda res: selector if is_sharded(res) else None)
        self.events = EventBroadcaster(client, clock)
        self.gate = ShardGate(ring=RING, member=name, informers=self.factory, client=client, clock=clock,
                              log=_log(name))
        self.controllers: list[Controller] = []
        for kind, res in ((DeploymentController, DEPLOYMENTS), (ReplicaSetController, REPLICASETS)):
            ctx = ControllerContext(client=client, informers=self.factory, clock=clock, events=self.events,
                                    intake=self.elector.wait_for_intake)
            ctrl = kind(ctx)
            ctx.admission = self.gate.admission(ctrl, res)
            self.controllers.append(ctrl)
        self.tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        await self.elector.acquire()
        self.tasks.append(asyncio.create_task(self._renew(), name=f"{self.name}:lease"))
        self.tasks.append(asyncio.create_task(self.factory.run(), name=f"{self.name}:informers"))
        self.tasks.append(asyncio.create_task(self.events.run(), name=f"{self.name}:events"))
        assert await self.factory.wait_for_cache_sync(timeout=15)
        self.tasks.append(asyncio.create_task(self.gate.run(), name=f"{self.name}:gate"))
        for ctrl in self.controllers:
            self.tasks.append(asyncio.create_task(run_controller(ctrl, 2), name=f"{self.name}:{ctrl.name}"))

    async def _renew(self) -> None:
        try:
            await self.elector.renew_loop()
        except LeadershipLost:
            return  # the test looks at the Lease

    async def stop(self) -> None:
        """A clean stop: controllers first, then the Lease released (if configured)."""
        for ctrl in self.controllers:
            ctrl.queue.shut_down()
        for task in reversed(self.tasks):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.tasks.clear()


def _log(name: str) -> Any:
    import structlog

    return structlog.get_logger("test.sharding").bind(member=name)


def _sample(metric: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(metric, {"ring": RING, **labels}) or 0.0


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


class Cluster:
    def __init__(self, h: Harness, audit: Path) -> None:
        self.h = h
        self.audit = audit
        self.members: dict[str, Member] = {}
        self.sharder: Sharder | None = None
        self.cluster_wide: SharedInformerFactory | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    async def start_sharder(self, *, as_leader: bool = False, **options: Any) -> None:
        factory = SharedInformerFactory(self.h.client, self.h.clock)
        if as_leader:
            # As in the manager, the leader's other controllers (disruption, GC, pod GC, ...) watch these whole
            # before the sharder is built (it then shares the pods informer).
            for res in (PODS, REPLICASETS, DEPLOYMENTS):
                factory.informer(res)
        self.cluster_wide = factory
        events = EventBroadcaster(self.h.client, self.h.clock)
        self.sharder = Sharder(ControllerContext(client=self.h.client, informers=factory, clock=self.h.clock,
                                                 events=events, options={**OPTIONS, **options}))
        self._tasks.append(asyncio.create_task(factory.run(), name="sharder:informers"))
        assert await factory.wait_for_cache_sync(timeout=15)
        self._tasks.append(asyncio.create_task(run_controller(self.sharder, 2), name="sharder"))

    async def add(self, name: str, *, release_on_stop: bool = True) -> Member:
        member = Member(self.h.client, self.h.clock, name, release_on_stop=release_on_stop)
        await member.start()
        self.members[name] = member
        return member

    async def close(self) -> None:
        for member in self.members.values():
            await member.stop()
        if self.sharder is not None:
            self.sharder.queue.shut_down()
        for task in reversed(self._tasks):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def owners(self) -> dict[str, dict[str, str]]:
        items = await self.h.list_objects(DEPLOYMENTS)
        return {d["metadata"]["name"]: d["metadata"].get("labels") or {} for d in items}

    async def converged(self, replicas: dict[str, int]) -> bool:
        items = {d["metadata"]["name"]: d for d in await self.h.list_objects(DEPLOYMENTS)}
        pods = await self.h.pods()
        for name, want in replicas.items():
            d = items.get(name)
            if d is None or (d.get("status") or {}).get("availableReplicas") != want:
                return False
            if sum(1 for p in pods if p["metadata"]["labels"].get("app") == name) != want:
                return False
        return True

    def pod_writes(self) -> tuple[int, int]:
        """(successful pod creates, successful pod deletes) received by kube-sim so far."""
        creates = deletes = 0
        for line in self.audit.read_text().splitlines() if self.audit.exists() else ():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("resource") != "pods" or ref.get("subresource") or event["responseStatus"]["code"] >= 400:
                continue
            creates += event["verb"] == "create"
            deletes += event["verb"] == "delete"
        return creates, deletes


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    audit = tmp_path / "audit.log"
    async with controller_harness(start=False, audit_log_path=audit) as h:
        c = Cluster(h, audit)
        try:
            yield c
        finally:
            await c.close()


async def scale_all(h: Harness, replicas: dict[str, int], to: int) -> None:
    for name in replicas:
        replicas[name] = to
        await h.client.patch(DEPLOYMENTS, name, {"spec": {"replicas": to}}, "default")


def _gauge(metric: str, res: Any, selector: str) -> float:
    return REGISTRY.get_sample_value(metric, {"name": f"{res.api_version}/{res.plural}", "selector": selector}) or 0.0


async def check_one_copy(cluster: Cluster, member: Member) -> None:
    """``member`` (the leader) holds its shard's objects once: its shard informers are views of the
    cluster-wide ones, holding the same objects, and its shard's pods are counted as viewed."""
    assert cluster.cluster_wide is not None
    selector = f"{LABEL}={member.name}"
    pods = [p for p in await cluster.h.pods() if p["metadata"]["labels"].get(LABEL) == member.name]
    for res in (PODS, REPLICASETS, DEPLOYMENTS):
        view, source = member.factory.existing(res), cluster.cluster_wide.existing(res)
        assert view is not None
        assert source is not None
        await wait_for(lambda v=view: _true(v.is_view), timeout=5, what=f"{res.plural} served from the source")
        assert all(view.store.get(k) is source.store.get(k) for k in view.store)
    # (informer_cached_objects{selector} is not read: another test's members of the same names may linger in it)
    await wait_for(lambda: _true(_gauge("informer_view_objects", PODS, selector) == len(pods)), timeout=5,
                   what="the leader's shard pods viewed")


async def _true(value: bool) -> bool:
    return value


async def test_work_spreads_a_joiner_gets_roots_by_draining_and_no_pod_is_duplicated(cluster: Cluster) -> None:
    h = cluster.h
    await cluster.add("m1")
    leader = await cluster.add("m2")
    await cluster.start_sharder(as_leader=True)
    assert cluster.cluster_wide is not None
    # m2 leads, as the manager wires a leader: its shard informers are served from the cluster-wide caches
    # (m2, as the ring gives m3 a root of m2's: a drain out of the views).
    assert leader.factory.serve_from(cluster.cluster_wide) == 3
    replicas = {f"web-{i}": 2 for i in range(8)}
    for name, n in replicas.items():
        await h.client.create(DEPLOYMENTS, deployment(name, n), "default")
    await wait_for(lambda: cluster.converged(replicas), timeout=30, what="every Deployment available")
    await check_one_copy(cluster, leader)
    owners = await cluster.owners()
    assert {ls.get(LABEL) for ls in owners.values()} == {"m1", "m2"}
    for rs in await h.list_objects(REPLICASETS):
        owner = rs["metadata"]["ownerReferences"][0]["name"]
        assert rs["metadata"]["labels"][LABEL] == owners[owner][LABEL]
    for pod in await h.pods():
        assert pod["metadata"]["labels"][LABEL] == owners[pod["metadata"]["labels"]["app"]][LABEL]

    drains_before = _sample("sharding_handovers_total", reason="drain")
    acks_before = sum(_sample("sharding_drain_duration_seconds_count", shard=m) for m in ("m1", "m2"))
    await cluster.add("m3")

    async def rebalanced() -> bool:
        now = await cluster.owners()
        return any(ls.get(LABEL) == "m3" for ls in now.values()) and all(
            ls.get(LABEL) and DRAIN not in ls for ls in now.values())

    await wait_for(rebalanced, timeout=20, what="roots to move to m3")
    moved = {n for n, ls in (await cluster.owners()).items() if ls[LABEL] == "m3"}
    # Every move to m3 was a drain, acknowledged by its old member.
    assert _sample("sharding_handovers_total", reason="drain") - drains_before == len(moved)
    assert sum(_sample("sharding_drain_duration_seconds_count", shard=m) for m in ("m1", "m2")) - acks_before \
        == len(moved)
    assert _sample("sharding_members") == 3
    for name in moved:
        d = await h.client.get(DEPLOYMENTS, name, "default")
        # Acknowledged by its previous member, then assigned: the annotation is cleared by the assignment.
        assert PREVIOUS_ANNOTATION not in (d["metadata"].get("annotations") or {})
    await scale_all(h, replicas, 3)
    await wait_for(lambda: cluster.converged(replicas), timeout=30, what="every Deployment scaled to 3")
    for pod in await h.pods():
        if pod["metadata"]["labels"]["app"] in moved:
            assert pod["metadata"]["labels"][LABEL] == "m3"
    assert moved & {n for n, ls in owners.items() if ls[LABEL] == leader.name}
    await check_one_copy(cluster, leader)  # what was drained away from it left its views
    await asyncio.sleep(0.3)  # the audit log's flush interval
    assert cluster.pod_writes() == (sum(replicas.values()), 0)


async def test_the_leader_takes_its_share_of_the_roots_and_none_at_share_zero(cluster: Cluster) -> None:
    h = cluster.h
    for name in ("m1", "m2", "m3"):
        await cluster.add(name)
    # m2 leads; with --sharding-leader-share=0 its sharder gives it nothing while the others are live
    await cluster.start_sharder(as_leader=True, sharding_member="m2", sharding_leader_share=0.0)
    replicas = {f"lite-{i}": 1 for i in range(9)}
    for name, n in replicas.items():
        await h.client.create(DEPLOYMENTS, deployment(name, n), "default")
    await wait_for(lambda: cluster.converged(replicas), timeout=30, what="every Deployment available")
    owners = {ls.get(LABEL) for ls in (await cluster.owners()).values()}
    assert owners == {"m1", "m3"}
    assert cluster.sharder is not None
    assert "weights={'m2': 0.0}" in repr(cluster.sharder.ring)


async def test_a_crashed_member_is_fenced_and_its_roots_move_at_once(cluster: Cluster) -> None:
    h = cluster.h
    await cluster.add("m1")
    crashed = await cluster.add("m2", release_on_stop=False)
    await cluster.start_sharder()
    replicas = {f"app-{i}": 2 for i in range(6)}
    for name, n in replicas.items():
        await h.client.create(DEPLOYMENTS, deployment(name, n), "default")
    await wait_for(lambda: cluster.converged(replicas), timeout=30, what="every Deployment available")
    assert "m2" in {ls.get(LABEL) for ls in (await cluster.owners()).values()}

    await crashed.stop()  # no release: its Lease just stops being renewed
    started = asyncio.get_running_loop().time()

    async def moved() -> bool:
        return all(ls.get(LABEL) == "m1" for ls in (await cluster.owners()).values())

    await wait_for(moved, timeout=10, what="m2's roots to move to m1")
    took = asyncio.get_running_loop().time() - started
    assert took < 2.0 + 1.5, took  # the lease duration, then the sharder's fence and relabel
    lease = await h.client.get(LEASES, "m2", NS)
    assert lease["spec"]["holderIdentity"] == SHARDER_IDENTITY
    # Dead long enough, its Lease is deleted (a member never creates it again).
    assert cluster.sharder is not None
    cluster.sharder.dead_lease_ttl = 0.5
    cluster.sharder.queue.add("ring")

    async def lease_gone() -> bool:
        try:
            await h.client.get(LEASES, "m2", NS)
        except NotFound:
            return True
        return False

    await wait_for(lease_gone, timeout=10, what="m2's Lease to be deleted")
    assert (await h.client.get(LEASES, "m1", NS))["spec"]["holderIdentity"] == "m1"
    await scale_all(h, replicas, 3)
    await wait_for(lambda: cluster.converged(replicas), timeout=30, what="every Deployment scaled to 3")
    for pod in await h.pods():
        assert pod["metadata"]["labels"][LABEL] == "m1"
    await asyncio.sleep(0.3)
    assert cluster.pod_writes() == (sum(replicas.values()), 0)
