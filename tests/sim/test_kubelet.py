"""kube-sim's kubelets on a FakeClock against an in-process API server: node registration, heartbeats and
the Lease, the pod lifecycle driven by the annotations, restart policies, graceful deletion, and a node
whose kubelet is stopped then resumed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller_manager.api.meta import parse_time
from controller_manager.api.resources import EVENTS, LEASES, NODES, PODS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.kubelet import KUBELET_ANNOTATION, KubeletConfig, KubeletManager, normalize_image

P = "sim.controller-manager.io/"
CONFIG = KubeletConfig(node_status_update_frequency=10.0, node_status_report_frequency=300.0,
                       lease_renew_interval=10.0, termination_delay=2.0, crash_loop_base=1.0, crash_loop_max=4.0)


async def eventually(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Poll until ``predicate()`` is truthy (returning it); fail after ``timeout`` real seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(0.002)


class Sim:
    def __init__(self, api: ApiServer, clock: FakeClock, kubelets: KubeletManager) -> None:
        self.api = api
        self.clock = clock
        self.kubelets = kubelets

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get(PODS, "default", name)
        except Exception:
            return None

    def status(self, name: str) -> dict[str, Any]:
        return (self.pod(name) or {}).get("status") or {}

    def create_pod(self, name: str, *, node: str = "node-1", annotations: dict[str, str] | None = None,
                   restart_policy: str | None = None, finalizers: list[str] | None = None,
                   containers: tuple[str, ...] = ("app",), init: tuple[str, ...] = ()) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeName": node,
                                "containers": [{"name": c, "image": "nginx:1.27"} for c in containers]}
        if init:
            spec["initContainers"] = [{"name": c, "image": "busybox"} for c in init]
        if restart_policy:
            spec["restartPolicy"] = restart_policy
        meta: dict[str, Any] = {"name": name, "namespace": "default",
                                "annotations": {P + k: v for k, v in (annotations or {}).items()}}
        if finalizers:
            meta["finalizers"] = finalizers
        return self.api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})

    def phase(self, name: str) -> str | None:
        return self.status(name).get("phase")

    def condition(self, name: str, ctype: str) -> str | None:
        for c in self.status(name).get("conditions") or ():
            if c["type"] == ctype:
                return str(c["status"])
        return None

    def container(self, name: str) -> dict[str, Any]:
        statuses = self.status(name).get("containerStatuses") or [{}]
        return dict(statuses[0])

    def killing(self, name: str) -> bool:
        return any(e["reason"] == "Killing" and e["involvedObject"]["name"] == name
                   for e in self.api.list(EVENTS, "default")[0])

    def annotate_node(self, node: str, value: str) -> None:
        self.api.patch(NODES, None, node, {"metadata": {"annotations": {KUBELET_ANNOTATION: value}}}, "merge")

    def lease_renew_time(self, node: str) -> str:
        return str(self.api.get(LEASES, "kube-node-lease", node)["spec"]["renewTime"])

    def ready_heartbeat(self, node: str) -> str:
        conds = self.api.get(NODES, None, node)["status"]["conditions"]
        return str(next(c for c in conds if c["type"] == "Ready")["lastHeartbeatTime"])

    async def advance(self, seconds: float, step: float = 0.5) -> None:
        """Move the fake clock in steps, letting the kubelet's worker write between them."""
        moved = 0.0
        while moved < seconds - 1e-9:
            delta = min(step, seconds - moved)
            self.clock.advance(delta)
            moved += delta
            for _ in range(20):
                await asyncio.sleep(0)


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    clock = FakeClock()
    api = ApiServer(clock)
    kubelets = KubeletManager(api, clock, CONFIG)
    kubelets.add_node("node-1", "zone-a")
    kubelets.add_node("node-2", "zone-b")
    task = asyncio.create_task(kubelets.run(), name="test-kubelets")
    s = Sim(api, clock, kubelets)
    try:
        await eventually(lambda: len(api.list(LEASES, "kube-node-lease")[0]) == 2)
        yield s
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        api.close_all_watches()


# ----------------------------------------------------------------------------- nodes


async def test_node_registration(sim: Sim) -> None:
    node = sim.api.get(NODES, None, "node-2")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "node-2"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] == "amd64"
    assert labels["topology.kubernetes.io/zone"] == "zone-b"
    assert labels["topology.kubernetes.io/region"] == CONFIG.region
    assert labels["node.kubernetes.io/instance-type"] == CONFIG.instance_type
    status = node["status"]
    for key in ("capacity", "allocatable"):
        assert {k: status[key][k] for k in ("cpu", "memory", "pods")} == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False", "Ready": "True"}
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "KubeletReady"
    assert ready["lastHeartbeatTime"]
    assert ready["lastTransitionTime"]
    assert [a["type"] for a in status["addresses"]] == ["InternalIP", "Hostname"]
    info = status["nodeInfo"]
    assert info["kubeletVersion"] == CONFIG.kubelet_version
    assert info["operatingSystem"] == "linux"
    assert info["architecture"] == "amd64"
    assert info["containerRuntimeVersion"].startswith("containerd://")
    lease = sim.api.get(LEASES, "kube-node-lease", "node-2")
    assert lease["spec"]["holderIdentity"] == "node-2"
    assert lease["spec"]["leaseDurationSeconds"] == CONFIG.lease_duration_seconds
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]


async def test_lease_renewed_and_status_reported_on_schedule(sim: Sim) -> None:
    renewed, heartbeat = sim.lease_renew_time("node-1"), sim.ready_heartbeat("node-1")
    await sim.advance(CONFIG.lease_renew_interval)
    await eventually(lambda: sim.lease_renew_time("node-1") != renewed)
    # Nothing changed, so the status is not re-posted before the report frequency...
    assert sim.ready_heartbeat("node-1") == heartbeat
    await sim.advance(CONFIG.node_status_report_frequency, step=10.0)
    # ...but it is once that much time has passed.
    await eventually(lambda: sim.ready_heartbeat("node-1") != heartbeat)


async def test_stopped_kubelet_goes_silent_and_comes_back(sim: Sim) -> None:
    sim.annotate_node("node-1", "stopped")
    await eventually(lambda: sim.kubelets.is_stopped("node-1"))
    renewed, heartbeat = sim.lease_renew_time("node-1"), sim.ready_heartbeat("node-1")
    other = sim.lease_renew_time("node-2")
    sim.create_pod("stuck", node="node-1")
    await sim.advance(CONFIG.node_status_report_frequency + 20, step=10.0)
    await eventually(lambda: sim.lease_renew_time("node-2") != other)
    assert sim.lease_renew_time("node-1") == renewed  # heartbeats stopped
    assert sim.ready_heartbeat("node-1") == heartbeat
    assert sim.status("stuck") == {"phase": "Pending", "qosClass": "BestEffort"}  # no pod progress
    # The node lifecycle controller would mark it Unknown; the resumed kubelet re-posts Ready.
    sim.api.patch(NODES, None, "node-1", {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}, "strategic", subresource="status")
    sim.annotate_node("node-1", "running")
    await eventually(lambda: not sim.kubelets.is_stopped("node-1"))
    await eventually(lambda: sim.lease_renew_time("node-1") != renewed)
    node = sim.api.get(NODES, None, "node-1")
    assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    await eventually(lambda: sim.phase("stuck") == "Running")


# ----------------------------------------------------------------------------- pods


async def test_pod_runs_with_kubelet_status(sim: Sim) -> None:
    sim.create_pod("web", containers=("b-side", "a-main"), init=("setup",))
    await eventually(lambda: sim.condition("web", "Ready") == "True")
    pod = sim.pod("web")
    assert pod is not None
    status = pod["status"]
    assert status["phase"] == "Running"
    assert status["hostIP"] == status["hostIPs"][0]["ip"]
    assert status["podIP"].startswith("10.244.")
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    assert parse_time(status["startTime"]) is not None
    assert [c["type"] for c in status["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled"]
    assert all(c["status"] == "True" and c["lastTransitionTime"] for c in status["conditions"])
    names = [c["name"] for c in status["containerStatuses"]]
    assert names == ["a-main", "b-side"]  # sorted by name, as the kubelet reports them
    for c in status["containerStatuses"]:
        assert c["ready"] is True
        assert c["started"] is True
        assert c["restartCount"] == 0
        assert c["image"] == "docker.io/library/nginx:1.27"
        assert c["imageID"].startswith("docker.io/library/nginx@sha256:")
        assert c["containerID"].startswith("containerd://")
        assert "startedAt" in c["state"]["running"]
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    reasons = {e["reason"] for e in sim.api.list(EVENTS, "default")[0] if e["involvedObject"]["name"] == "web"}
    assert {"Pulled", "Created", "Started"} <= reasons


async def test_start_seconds_keeps_containers_creating(sim: Sim) -> None:
    sim.create_pod("slow", annotations={"start-seconds": "5"})
    await eventually(lambda: sim.container("slow").get("state", {}).get("waiting"))
    assert sim.phase("slow") == "Pending"
    assert sim.container("slow")["state"]["waiting"]["reason"] == "ContainerCreating"
    assert sim.condition("slow", "Ready") == "False"
    assert sim.condition("slow", "PodScheduled") == "True"
    await sim.advance(4)
    assert sim.phase("slow") == "Pending"
    await sim.advance(1)
    await eventually(lambda: sim.phase("slow") == "Running")


async def test_ready_after_seconds_lags_readiness(sim: Sim) -> None:
    sim.create_pod("lag", annotations={"ready-after-seconds": "3"})
    await eventually(lambda: sim.phase("lag") == "Running")
    assert sim.condition("lag", "Ready") == "False"
    ready = next(c for c in sim.status("lag")["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [app]"
    assert sim.container("lag")["ready"] is False
    assert sim.container("lag")["started"] is True
    await sim.advance(3)
    await eventually(lambda: sim.condition("lag", "Ready") == "True")


@pytest.mark.parametrize(
    ("policy", "code", "phase", "reason"),
    [
        pytest.param("Never", "0", "Succeeded", "Completed", id="never-success"),
        pytest.param("Never", "3", "Failed", "Error", id="never-failure"),
        pytest.param("OnFailure", "0", "Succeeded", "Completed", id="onfailure-success"),
    ],
)
async def test_run_seconds_ends_the_pod(sim: Sim, policy: str, code: str, phase: str, reason: str) -> None:
    sim.create_pod("job", annotations={"run-seconds": "2", "exit-code": code}, restart_policy=policy)
    await eventually(lambda: sim.phase("job") == "Running")
    await sim.advance(2)
    await eventually(lambda: sim.phase("job") == phase)
    terminated = sim.container("job")["state"]["terminated"]
    assert terminated["exitCode"] == int(code)
    assert terminated["reason"] == reason
    assert sim.condition("job", "Ready") == "False"
    assert next(c for c in sim.status("job")["conditions"] if c["type"] == "Ready")["reason"] == "PodCompleted"
    await sim.advance(10)
    assert sim.phase("job") == phase  # terminal: nothing restarts


@pytest.mark.parametrize(
    ("policy", "code"),
    [pytest.param("OnFailure", "1", id="onfailure-failure"), pytest.param("Always", "0", id="always-success"),
     pytest.param("Always", "2", id="always-failure")],
)
async def test_restart_with_crash_loop_backoff(sim: Sim, policy: str, code: str) -> None:
    sim.create_pod("crash", annotations={"run-seconds": "1", "exit-code": code}, restart_policy=policy)
    await eventually(lambda: sim.phase("crash") == "Running" and "running" in sim.container("crash")["state"])
    await sim.advance(1, step=1.0)
    await eventually(lambda: "waiting" in sim.container("crash")["state"])
    c = sim.container("crash")
    assert c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert c["lastState"]["terminated"]["exitCode"] == int(code)
    assert c["restartCount"] == 0
    assert sim.phase("crash") == "Running"
    assert sim.condition("crash", "Ready") == "False"
    await sim.advance(CONFIG.crash_loop_base, step=1.0)  # first back-off
    await eventually(lambda: sim.container("crash")["restartCount"] == 1
                     and "running" in sim.container("crash")["state"])
    assert sim.condition("crash", "Ready") == "True"
    events = [e for e in sim.api.list(EVENTS, "default")[0] if e["reason"] == "BackOff"]
    assert events
    assert events[0]["type"] == "Warning"


async def test_graceful_deletion_is_confirmed(sim: Sim) -> None:
    sim.create_pod("bye")
    await eventually(lambda: sim.phase("bye") == "Running")
    sim.api.delete(PODS, "default", "bye", grace_period_seconds=30)
    deleting = sim.pod("bye")
    assert deleting is not None
    assert deleting["metadata"]["deletionTimestamp"]
    await eventually(lambda: sim.killing("bye"))  # the kubelet saw the deletion and stops the containers
    await sim.advance(CONFIG.termination_delay - 0.5)
    assert sim.pod("bye") is not None  # still terminating
    await sim.advance(0.5)
    await eventually(lambda: sim.pod("bye") is None)


async def test_grace_period_shorter_than_the_sim_delay(sim: Sim) -> None:
    sim.create_pod("quick")
    await eventually(lambda: sim.phase("quick") == "Running")
    sim.api.delete(PODS, "default", "quick", grace_period_seconds=1)
    await eventually(lambda: sim.killing("quick"))
    await sim.advance(1)
    await eventually(lambda: sim.pod("quick") is None)


async def test_finalizer_keeps_the_confirmed_pod(sim: Sim) -> None:
    sim.create_pod("held", finalizers=["example.com/hold"])
    await eventually(lambda: sim.phase("held") == "Running")
    sim.api.delete(PODS, "default", "held")
    await eventually(lambda: sim.killing("held"))
    await sim.advance(CONFIG.termination_delay)
    await eventually(lambda: sim.phase("held") == "Failed")
    pod = sim.pod("held")
    assert pod is not None
    assert pod["metadata"]["deletionTimestamp"]
    assert sim.container("held")["state"]["terminated"]["exitCode"] == 143
    sim.api.patch(PODS, "default", "held", {"metadata": {"finalizers": None}}, "merge")
    await eventually(lambda: sim.pod("held") is None)


async def test_terminal_pod_deletion_is_confirmed_at_once(sim: Sim) -> None:
    sim.create_pod("done", annotations={"run-seconds": "0"}, restart_policy="Never")
    await eventually(lambda: sim.phase("done") == "Succeeded")
    sim.api.delete(PODS, "default", "done", grace_period_seconds=30)
    await sim.advance(0.1)
    await eventually(lambda: sim.pod("done") is None)


async def test_pods_of_other_nodes_are_left_alone(sim: Sim) -> None:
    sim.create_pod("elsewhere", node="node-99")
    sim.create_pod("here", node="node-2")
    await eventually(lambda: sim.phase("here") == "Running")
    assert sim.status("elsewhere").get("phase") == "Pending"
    assert "containerStatuses" not in sim.status("elsewhere")


@pytest.mark.parametrize(
    ("image", "normal"),
    [pytest.param("nginx", "docker.io/library/nginx:latest", id="bare"),
     pytest.param("nginx:1.27", "docker.io/library/nginx:1.27", id="tag"),
     pytest.param("bitnami/redis", "docker.io/bitnami/redis:latest", id="user"),
     pytest.param("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9", id="registry"),
     pytest.param("localhost:5000/app", "localhost:5000/app:latest", id="registry-port")],
)
def test_normalize_image(image: str, normal: str) -> None:
    assert normalize_image(image) == normal
