"""Sharding (``--sharding=true``) end to end: three controller-manager processes share the workload controllers.

Proven from outside, by the objects' labels and kube-sim's audit log (each replica authenticates as its own user):
- the work spreads: every replica is assigned Deployments and creates their pods itself;
- so does the memory: a replica that does not lead caches only the objects labelled with its shard (its
  ``informer_cached_objects`` series all select its label, but for the nodes and PVCs the daemonset and
  statefulset controllers need whole), while the leader alone holds the cluster-wide caches, and serves its own
  shard's informers from them (``informer_view_objects``) instead of caching its shard a second time;
- a replica killed with SIGKILL loses its Deployments to the others within its Lease's duration (plus the
  sharder's look), and scaling them up afterwards is done by their new owners;
- a replica that joins gets Deployments moved to it by draining (the old owner acknowledges);
- through all of it, not one pod too many: the pods created (successful creates in the audit log) are exactly
  the Deployments' final replicas and no replica ever deleted a pod.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest

from controller_manager.runtime.sharding.ring import HashRing
from tests.e2e.conftest import (
    LEASE_DURATION,
    Https,
    Kube,
    Manager,
    Processes,
    official_client,
    read_audit_log,
    start_kube_sim,
    start_manager,
    user_kubeconfig,
    wait_until,
    write_token_file,
)

# Four controller-manager processes and a kube-sim: about a minute on a busy 2-core machine, most of it process
# start-up, so outside `make test` (`make test-sharding`).
pytestmark = [pytest.mark.e2e, pytest.mark.sharding, pytest.mark.xdist_group("e2e")]

USERS = ("replica-a", "replica-b", "replica-c", "replica-d")
RING = "controller-manager-py"
SHARD_LABEL = f"shard.controller-manager.io/{RING}"
DRAIN_LABEL = f"drain.controller-manager.io/{RING}"
# Six Deployments per first member, named so the ring gives each exactly six (members' names are random, so
# names picked blindly left one member with none about once in 40 runs); the fourth replica, whose name is not
# known in advance, then takes some of 18 with probability 1 - (2/3)^18 (99.93%).
DEPLOYMENTS = 18


def balanced_names(members: Iterable[str], count: int) -> list[str]:
    """``count`` Deployment names in "default" that the sharder's ring spreads evenly over ``members``."""
    ring = HashRing(members)
    share = count // len(ring.members)
    taken: Counter[str | None] = Counter()
    names: list[str] = []
    for i in itertools.count():
        owner = ring.owner(f"default/web-{i}")
        if taken[owner] < share:
            taken[owner] += 1
            names.append(f"web-{i}")
        if len(names) == count:
            return names
    raise AssertionError("unreachable")


def deployment(name: str, replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }


async def labels_of(kube: Kube, kind: str) -> dict[str, dict[str, str]]:
    if kind == "deployments":
        items = (await kube(kube.apps.list_namespaced_deployment, "default")).items
    elif kind == "replicasets":
        items = (await kube(kube.apps.list_namespaced_replica_set, "default")).items
    else:
        items = (await kube(kube.core.list_namespaced_pod, "default")).items
    return {i.metadata.name: dict(i.metadata.labels or {}) for i in items}


async def member_of(manager: Manager) -> str:
    async def logged() -> str | None:
        for record in manager.process.records():
            if record.get("event") == "holding the shard lease":
                return str(record["shard"])
        return None

    return await wait_until(logged, timeout=30, what=f"{manager.process.name} to hold its shard lease")


async def all_ready(kube: Kube, replicas: dict[str, int]) -> bool:
    items = (await kube(kube.apps.list_namespaced_deployment, "default")).items
    have = {d.metadata.name: d for d in items}
    return all(n in have and (have[n].status.ready_replicas or 0) == r and (have[n].status.replicas or 0) == r
               for n, r in replicas.items())


CLUSTER_WIDE_ON_MEMBERS = {"v1/nodes", "v1/persistentvolumeclaims"}  # daemonset, statefulset: see docs/sharding.md


async def cached_objects(https: Https, manager: Manager, token: str, metric: str = "informer_cached_objects"
                         ) -> dict[tuple[str, str], int]:
    """``informer_cached_objects`` (or ``informer_view_objects``) from the replica's /metrics: (informer,
    selector) -> objects."""
    status, text = await https.get(manager, "/metrics", token=token)
    assert status == 200, text
    out: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            series, _, value = line.rpartition(" ")
            labels = dict(part.split("=", 1) for part in series[series.index("{") + 1:-1].split('",'))
            out[(labels["name"].strip('"'), labels["selector"].strip('"'))] = int(float(value))
    return out


async def wait_cached(https: Https, manager: Manager, token: str, informer: tuple[str, str], objects: int,
                      metric: str = "informer_cached_objects") -> dict[tuple[str, str], int]:
    """The replica's cached objects once ``informer`` holds ``objects`` (its watch may be a moment behind)."""
    async def reached() -> dict[tuple[str, str], int] | None:
        cached = await cached_objects(https, manager, token, metric)
        return cached if cached.get(informer) == objects else None

    return await wait_until(reached, timeout=10, what=f"{manager.process.name}'s {informer} to hold {objects}")


def pod_writes(audit: Path, users: set[str]) -> Counter[str]:
    return Counter(f"{e.user}:{e.verb}" for e in read_audit_log(audit)
                   if e.user in users and e.resource == "pods" and e.write and e.code < 400)


async def test_three_replicas_share_the_work_hand_over_on_death_and_rebalance_on_join(
        processes: Processes, https: Https, tmp_path: Path) -> None:
    tokens = write_token_file(tmp_path / "tokens.csv", USERS)
    audit = tmp_path / "audit.log"
    sim = await start_kube_sim(processes, extra=("--token-auth-file", str(tmp_path / "tokens.csv"),
                                                 "--audit-log-path", str(audit)))

    async def start(user: str) -> Manager:
        return await start_manager(processes, sim, "--sharding=true", name=f"manager-{user[-1]}", https=https,
                                   kubeconfig=user_kubeconfig(sim, user, tokens[user]))

    managers = list(await asyncio.gather(*(start(u) for u in USERS[:3])))
    members = {await member_of(m): m for m in managers}
    user_of = {member: USERS[managers.index(m)] for member, m in members.items()}
    async with official_client(sim) as kube:
        async def default_account() -> bool:
            try:
                await kube(kube.core.read_namespaced_service_account, "default", "default")
            except Exception:
                return False
            return True

        await wait_until(default_account, timeout=30, what='the "default" ServiceAccount')
        replicas = {name: 1 for name in balanced_names(members, DEPLOYMENTS)}
        for name, count in replicas.items():
            await kube.retrying(kube.apps.create_namespaced_deployment, "default", deployment(name, count))
        await wait_until(lambda: all_ready(kube, replicas), timeout=30, what="every Deployment ready")

        # The work spreads: each replica owns Deployments and created their pods itself.
        owners = {n: ls.get(SHARD_LABEL) for n, ls in (await labels_of(kube, "deployments")).items()}
        assert set(owners.values()) == set(members), owners
        pods = await labels_of(kube, "pods")
        for name, labels in pods.items():
            assert labels.get(SHARD_LABEL) == owners[labels["app"]], (name, labels)
        creators = {user for key, n in pod_writes(audit, set(USERS)).items() for user in [key.split(":")[0]]
                    if key.endswith(":create") and n > 0}
        assert creators == set(USERS[:3]), creators

        # The memory spreads too: a replica that does not lead caches its own shard's objects and no other pod.
        roles = {m: await https.role(mgr) or "" for m, mgr in members.items()}
        for member, mgr in members.items():
            token = tokens[user_of[member]]
            mine = f"{SHARD_LABEL}={member}"
            own_pods = sum(1 for labels in pods.values() if labels.get(SHARD_LABEL) == member)
            if roles[member].startswith("standby"):
                cached = await wait_cached(https, mgr, token, ("v1/pods", mine), own_pods)
                cluster_wide = {name for (name, selector), n in cached.items() if not selector}
                assert cluster_wide <= CLUSTER_WIDE_ON_MEMBERS, cached
                assert {selector for (_, selector) in cached if selector} == {mine}, cached
            else:
                # The leader's shard pods, ReplicaSets and Deployments are views of its cluster-wide caches: held once.
                await wait_cached(https, mgr, token, ("v1/pods", mine), own_pods, metric="informer_view_objects")
                cached = await cached_objects(https, mgr, token)
                assert cached[("v1/pods", "")] == len(pods), cached  # the leader's controllers see every pod
                for kind in ("v1/pods", "apps/v1/replicasets", "apps/v1/deployments"):
                    assert not cached.get((kind, mine)), cached

        # Kill a replica that does not lead: its Deployments move to the others at once once its Lease expires.
        victim = next(m for m, role in roles.items() if role.startswith("standby"))
        assert all(f"shard {m} in ring {RING}" in role for m, role in roles.items()), roles
        members[victim].process.send(signal.SIGKILL)
        await members[victim].process.wait(10)
        killed_at = asyncio.get_running_loop().time()

        async def moved() -> bool:
            now = await labels_of(kube, "deployments")
            return all(ls.get(SHARD_LABEL) not in (None, victim) for ls in now.values())

        await wait_until(moved, timeout=LEASE_DURATION * 4, what=f"{victim}'s Deployments to move")
        took = asyncio.get_running_loop().time() - killed_at
        print(f"moved {sum(1 for o in owners.values() if o == victim)} Deployments off the killed replica "
              f"in {took:.2f}s (lease {LEASE_DURATION}s)")
        for name in replicas:
            replicas[name] = 2
            await kube.retrying(kube.apps.patch_namespaced_deployment_scale, name, "default",
                                {"spec": {"replicas": 2}})
        await wait_until(lambda: all_ready(kube, replicas), timeout=30, what="every Deployment scaled to 2")

        # A fourth replica joins: some Deployments move to it by draining.
        joiner = await start(USERS[3])
        new_member = await member_of(joiner)

        async def rebalanced() -> bool:
            now = await labels_of(kube, "deployments")
            return any(ls.get(SHARD_LABEL) == new_member for ls in now.values()) and \
                all(DRAIN_LABEL not in ls and ls.get(SHARD_LABEL) for ls in now.values())

        await wait_until(rebalanced, timeout=30, what="Deployments to move to the new replica")
        drained = [r for mgr in members.values() if mgr is not members[victim]
                   for r in mgr.process.records() if r.get("event") == "drained root for its new shard"]
        assert drained, "no replica acknowledged a drain"
        for name in replicas:
            replicas[name] = 3
            await kube.retrying(kube.apps.patch_namespaced_deployment_scale, name, "default",
                                {"spec": {"replicas": 3}})
        await wait_until(lambda: all_ready(kube, replicas), timeout=30, what="every Deployment scaled to 3")
        joined_owns = {n for n, ls in (await labels_of(kube, "deployments")).items()
                       if ls.get(SHARD_LABEL) == new_member}
        pods = await labels_of(kube, "pods")
        assert all(ls.get(SHARD_LABEL) == new_member for ls in pods.values() if ls["app"] in joined_owns)

        # Not one pod too many across the hand-overs.
        await asyncio.sleep(0.3)  # > the audit log's flush interval
        writes = pod_writes(audit, set(USERS))
        assert sum(n for k, n in writes.items() if k.endswith(":delete")) == 0, writes
        assert sum(n for k, n in writes.items() if k.endswith(":create")) == sum(replicas.values()), writes
        assert len(pods) == sum(replicas.values())
        assert writes[f"{USERS[3]}:create"] > 0, writes
        spread = Counter(user_of.get(str(o), str(o)) for o in owners.values())
        print("pod writes per replica:", dict(writes), "first owners:", dict(spread))
