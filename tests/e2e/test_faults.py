"""The daemon against a misbehaving API server (``kube-sim --faults``): a share of requests answered 500 or
429, watches refused or expired (410, so informers re-list) and a lagging watch cache. A Deployment still
converges to exactly its replica count, through a rollout and a scale-down, never asks for more pods than
replicas + maxSurge, and never makes a pod twice."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import (
    Https,
    Kube,
    Processes,
    official_client,
    start_kube_sim,
    start_manager,
    wait_until,
    watch_pods,
    watch_replica_sets,
)

# Scale-ups that keep a core busy: one at a time (the "e2e" xdist group).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

FAULTS = ",".join((
    "error:code=500:p=0.05",  # any verb, any resource
    "error:code=429:p=0.05:retry-after=1",
    "error:code=500:every=8:verb=watch",  # a watch that cannot start
    "error:code=410:every=6:verb=watch",  # a watch too old: the reflector must re-list
    "slow-watch:seconds=0.2",  # every change reaches watchers late: caches lag the daemon's own writes
))

REPLICAS = 12
MAX_SURGE = 3


def deployment(replicas: int, image: str) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "steady", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "steady"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": MAX_SURGE, "maxUnavailable": 2}},
            "template": {"metadata": {"labels": {"app": "steady"}},
                         "spec": {"containers": [{"name": "c", "image": image}]}},
        },
    }


async def converged(kube: Kube, replicas: int, image: str) -> bool:
    d = await kube.retrying(kube.apps.read_namespaced_deployment, "steady", "default")
    status = d.status
    if (status.observed_generation or 0) < d.metadata.generation:
        return False
    if (status.replicas, status.updated_replicas, status.available_replicas) != (replicas, replicas, replicas):
        return False
    pods = await kube.active_pods("app=steady")
    return len(pods) == replicas and {p["spec"]["containers"][0]["image"] for p in pods} == {image}


async def test_a_deployment_converges_exactly_through_api_errors_and_broken_watches(
        processes: Processes, https: Https) -> None:
    sim = await start_kube_sim(processes, faults=FAULTS)
    async with official_client(sim) as kube:
        manager = await start_manager(processes, sim, election=(), https=https)  # kube-controller-manager's timings
        await https.wait_role(manager, "leader", timeout=60)

        async with watch_pods(sim, "app=steady") as pods, watch_replica_sets(sim, "app=steady") as sets:
            await kube.retrying(kube.apps.create_namespaced_deployment, "default", deployment(REPLICAS, "nginx:1"))
            await wait_until(lambda: converged(kube, REPLICAS, "nginx:1"), timeout=60, interval=0.2,
                             what=f"{REPLICAS} available replicas")
            assert pods.peak == REPLICAS, pods.peak_state
            assert len(pods.seen) == REPLICAS  # no duplicate was ever made (and deleted)

            # A rolling update: never more than replicas + maxSurge pods asked for. (Running pods may briefly
            # be more, as upstream: an old pod whose DELETE was answered 429 lives on while the new ReplicaSet
            # grows, since the surge is counted on ReplicaSet sizes.)
            patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}}
            await kube.retrying(kube.apps.patch_namespaced_deployment, "steady", "default", patch)
            await wait_until(lambda: converged(kube, REPLICAS, "nginx:2"), timeout=60, interval=0.2,
                             what="the rollout to nginx:2")
            assert sets.peak <= REPLICAS + MAX_SURGE, sets.peak_state
            assert len(pods.seen) == 2 * REPLICAS  # each new-template pod made once

            await kube.retrying(kube.apps.patch_namespaced_deployment_scale, "steady", "default",
                                {"spec": {"replicas": 3}})
            await wait_until(lambda: converged(kube, 3, "nginx:2"), timeout=60, interval=0.2,
                             what="the scale-down to 3")
            assert len(pods.seen) == 2 * REPLICAS
        print(f"faults: peak {pods.peak} active pods, {sets.peak} asked for, {len(pods.seen)} created")

        # The faults really happened, and the daemon rode them out without restarting.
        injected = re.findall(r"event='fault injected' code=(\d+)", sim.process.text())
        assert {"500", "429", "410"} <= set(injected), injected
        print("faults injected: " + ", ".join(f"{c}: {injected.count(c)}" for c in sorted(set(injected))))
        assert manager.process.returncode is None
        assert await https.role(manager) == "leader"
