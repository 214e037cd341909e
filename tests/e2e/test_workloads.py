"""Deployments run by the daemon process, driven the way users drive them: ``kubectl apply``, ``set image``,
``rollout status`` and ``rollout undo``; pods deleted and counted through the official client; events as
``kubectl get events`` prints them; and a daemon restart in the middle of a scale-up."""

from __future__ import annotations

import json
import re
import signal

import pytest

from tests.e2e.conftest import (
    ROOT,
    ApiWatch,
    Https,
    Kube,
    Kubectl,
    KubeSim,
    Processes,
    start_manager,
    wait_for_default_service_account,
    wait_until,
    watch_pods,
    watch_replica_sets,
)

# Scale-ups that keep a core busy: one at a time (the "e2e" xdist group).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

EXAMPLE = ROOT / "deploy" / "examples" / "01-deployment.yaml"


def rolled_out(out: str, name: str) -> bool:
    return f'deployment "{name}" successfully rolled out' in out


async def images(kube: Kube, selector: str) -> set[str]:
    return {c["image"] for p in await kube.active_pods(selector) for c in p["spec"]["containers"]}


async def replica_sets(kube: Kube, selector: str) -> dict[str, int]:
    """ReplicaSet name -> spec.replicas."""
    listed = await kube(kube.apps.list_namespaced_replica_set, "default", label_selector=selector)
    return {rs.metadata.name: rs.spec.replicas for rs in listed.items}


async def test_kubectl_rollouts_self_healing_and_events(
        processes: Processes, sim: KubeSim, https: Https, kube: Kube, kubectl: Kubectl) -> None:
    await start_manager(processes, sim, https=https)

    async with watch_pods(sim, "app=web") as pods, watch_replica_sets(sim, "app=web") as sets:
        out = await kubectl.ok("apply", "-f", str(EXAMPLE))
        assert out.strip() == "deployment.apps/web created"
        assert rolled_out(await kubectl.ok("rollout", "status", "deployment/web", "--timeout=60s"), "web")
        assert await images(kube, "app=web") == {"nginx:1.27"}
        assert len(await kube.active_pods("app=web")) == 6
        first_rs = next(iter(await replica_sets(kube, "app=web")))

        await kubectl.ok("set", "image", "deployment/web", "nginx=nginx:1.28")
        assert rolled_out(await kubectl.ok("rollout", "status", "deployment/web", "--timeout=60s"), "web")
        assert await images(kube, "app=web") == {"nginx:1.28"}
        rs = await replica_sets(kube, "app=web")
        assert rs[first_rs] == 0
        assert sorted(rs.values()) == [0, 6]

        await kubectl.ok("rollout", "undo", "deployment/web")
        assert rolled_out(await kubectl.ok("rollout", "status", "deployment/web", "--timeout=60s"), "web")
        assert await images(kube, "app=web") == {"nginx:1.27"}
        assert (await replica_sets(kube, "app=web"))[first_rs] == 6  # the old ReplicaSet came back
        history = await kubectl.ok("rollout", "history", "deployment/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]
    # replicas 6, maxSurge 2: never more than 8 pods asked for, nor running, through two rollouts.
    assert sets.peak == 8, sets.peak_state
    assert 6 <= pods.peak <= 8, pods.peak_state
    print(f"rollouts: peak {pods.peak} active pods, {len(pods.seen)} pods created, {pods.events} pod events")

    # Self-healing: a deleted pod is replaced.
    pods = await kube.active_pods("app=web")
    victim = pods[0]["metadata"]["name"]
    await kube(kube.core.delete_namespaced_pod, victim, "default")

    async def replaced() -> bool:
        names = {p["metadata"]["name"] for p in await kube.active_pods("app=web")}
        return len(names) == 6 and victim not in names

    await wait_until(replaced, what=f"{victim} to be replaced")
    deployment = await kube(kube.apps.read_namespaced_deployment, "web", "default")
    assert deployment.metadata.annotations["deployment.kubernetes.io/revision"] == "3"

    # Events, worded as kube-controller-manager words them.
    rs_names = await replica_sets(kube, "app=web")
    new_rs = next(name for name, replicas in rs_names.items() if replicas == 6)

    # The daemon's writes are recorded as kube-controller-manager's (its User-Agent), as a real cluster shows them.
    def managers(doc: str) -> set[tuple[str, str, str]]:
        return {(e["manager"], e["operation"], e.get("subresource", ""))
                for e in json.loads(doc)["metadata"]["managedFields"]}

    rs_json = await kubectl.ok("get", "rs", new_rs, "-o", "json", "--show-managed-fields")
    assert managers(rs_json) == {("kube-controller-manager", "Update", ""),
                                 ("kube-controller-manager", "Update", "status")}
    deploy_json = await kubectl.ok("get", "deploy", "web", "-o", "json", "--show-managed-fields")
    assert {("kubectl-client-side-apply", "Update", ""),
            ("kube-controller-manager", "Update", "status")} <= managers(deploy_json)
    lines = (await kubectl.ok("get", "events", "-n", "default")).splitlines()

    def shown(reason: str, obj: str, message: str) -> bool:
        pattern = re.compile(rf"\s{reason}\s+{re.escape(obj)}\s+{message}$")
        return any(pattern.search(line) for line in lines)

    assert shown("ScalingReplicaSet", "deployment/web", rf"Scaled up replica set {new_rs} from 0 to \d"), lines
    assert shown("ScalingReplicaSet", "deployment/web", r"Scaled down replica set web-\w+ from \d to \d"), lines
    assert shown("SuccessfulCreate", f"replicaset/{new_rs}", rf"Created pod: {new_rs}-\w+"), lines
    assert shown("SuccessfulDelete", f"replicaset/{first_rs}", rf"Deleted pod: {first_rs}-\w+"), lines


def deployment(name: str, replicas: int) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
        },
    })


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, id="sigterm"),
                                 pytest.param(signal.SIGKILL, id="sigkill")])
async def test_a_restart_mid_scale_up_ends_with_exactly_the_replicas(
        processes: Processes, sim: KubeSim, https: Https, kube: Kube, kubectl: Kubectl, sig: signal.Signals) -> None:
    replicas = 60
    # A tight client-side rate limit (as on a busy cluster): the scale-up then queues its creates and events
    # for seconds, well past the 2 s renew deadline, in the controllers' token bucket.
    # The serviceaccount controller makes the namespace's "default" ServiceAccount, without which kube-sim (as
    # kube-apiserver, its ServiceAccount admission on) refuses the pods.
    flags = ("--controllers=deployment,replicaset,serviceaccount", "--kube-api-qps=10", "--kube-api-burst=10")
    first = await start_manager(processes, sim, *flags, name="manager-1", https=https)
    await https.wait_role(first, "leader")
    await wait_for_default_service_account(kubectl)
    manifest = processes.directory / "big.json"
    manifest.write_text(deployment("big", replicas))

    async with watch_pods(sim, "app=big") as pods:
        await kubectl.ok("apply", "-f", str(manifest))
        await wait_until(lambda: _at_least(pods, 10), what="the scale-up to be under way")
        first.process.send(sig)
        at_signal = pods.value
        assert at_signal < replicas  # the restart really comes mid-scale-up
        # SIGTERM lets the in-flight sync finish its slow-start batches; SIGKILL abandons them.
        assert await first.process.wait(30) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        at_exit = pods.value
        print(f"{sig.name}: {at_signal}/{replicas} pods when signalled, {at_exit} when the manager had exited")
        if sig == signal.SIGKILL:
            assert at_exit < replicas

        second = await start_manager(processes, sim, *flags, name="manager-2", https=https)
        out = await kubectl.ok("rollout", "status", "deployment/big", "--timeout=60s")
        assert rolled_out(out, "big")
        assert len(await kube.active_pods("app=big")) == replicas
    # The lease renewals, on their own client as upstream's, were never stuck behind the queued creates:
    # neither manager lost its lease (which exits 1) while the pods were being made.
    assert second.process.returncode is None
    assert await https.role(second) == "leader"
    # One ReplicaSet: it is never asked for more than the replicas, so maxSurge never applies.
    assert pods.peak == replicas, pods.peak_state
    assert len(pods.seen) == replicas  # no pod created twice, none deleted and replaced
    assert len(await replica_sets(kube, "app=big")) == 1


async def _at_least(watch: ApiWatch, n: int) -> bool:
    return watch.value >= n
