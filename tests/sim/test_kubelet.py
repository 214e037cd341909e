"""kube-sim's kubelets on a FakeClock against an in-process API server: node registration, heartbeats and
the Lease, the pod lifecycle driven by the annotations, restart policies, graceful deletion, and a node
whose kubelet is stopped then resumed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller_manager.api.meta import format_time, parse_time
from controller_manager.api.resources import EVENTS, LEASES, NODES, PODS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions
from controller_manager.sim.kubelet import KUBELET_ANNOTATION, KubeletConfig, KubeletManager

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
    assert info["kubeletVersion"] == CONFIG.kubelet_version == ApiServerOptions().git_version
    assert info["kubeProxyVersion"] == ""
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
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
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
    ("policy", "code", "phase", "reason", "ready_reason"),
    [
        pytest.param("Never", "0", "Succeeded", "Completed", "PodCompleted", id="never-success"),
        pytest.param("Never", "3", "Failed", "Error", "PodFailed", id="never-failure"),
        pytest.param("OnFailure", "0", "Succeeded", "Completed", "PodCompleted", id="onfailure-success"),
    ],
)
async def test_run_seconds_ends_the_pod(sim: Sim, policy: str, code: str, phase: str, reason: str,
                                        ready_reason: str) -> None:
    sim.create_pod("job", annotations={"run-seconds": "2", "exit-code": code}, restart_policy=policy)
    await eventually(lambda: sim.phase("job") == "Running")
    await sim.advance(2)
    await eventually(lambda: sim.phase("job") == phase)
    terminated = sim.container("job")["state"]["terminated"]
    assert terminated["exitCode"] == int(code)
    assert terminated["reason"] == reason
    assert sim.condition("job", "Ready") == "False"
    assert next(c for c in sim.status("job")["conditions"] if c["type"] == "Ready")["reason"] == ready_reason
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


# ----------------------------------------------------------------------------- the whole status, stage by stage


def cond(ctype: str, status: str, since: str, reason: str = "", message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


async def test_full_status_at_every_stage_of_a_crashing_pod(sim: Sim) -> None:
    """Exactly what the real kubelet shows, and nothing left over from an earlier stage (a Ready=True that
    still carried ContainersNotReady's reason and message was the bug this pins down)."""
    t0 = sim.clock.now()

    def at(offset: float) -> str:
        return format_time(t0 + offset)

    created = sim.create_pod("web", annotations={"start-seconds": "2", "ready-after-seconds": "3", "run-seconds": "5",
                                                 "exit-code": "1"})
    uid = created["metadata"]["uid"]
    host_ip = sim.api.get(NODES, None, "node-1")["status"]["addresses"][0]["address"]
    unready = "containers with unready status: [app]"
    base = {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}]}

    # Pending: the sandbox is being made, the container waits in ContainerCreating with the spec's image.
    await eventually(lambda: "containerStatuses" in sim.status("web"))
    assert sim.status("web") == {
        "phase": "Pending",
        "conditions": [cond("PodReadyToStartContainers", "False", at(0)), cond("Initialized", "True", at(0)),
                       cond("Ready", "False", at(0), "ContainersNotReady", unready),
                       cond("ContainersReady", "False", at(0), "ContainersNotReady", unready),
                       cond("PodScheduled", "True", at(0))],
        **base,
        "startTime": at(0),
        "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {},
                               "ready": False, "restartCount": 0, "image": "nginx:1.27", "imageID": "",
                               "started": False}],
        "qosClass": "BestEffort",
    }

    # Running, not yet ready.
    await sim.advance(2)
    await eventually(lambda: sim.phase("web") == "Running")
    status = sim.status("web")
    first = status["containerStatuses"][0]
    image_id, first_id = first["imageID"], first["containerID"]
    assert image_id.startswith("docker.io/library/nginx@sha256:")
    assert first_id.startswith("containerd://")
    pod_ip = status["podIP"]
    base = {**base, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": at(0)}
    running = {"name": "app", "image": "docker.io/library/nginx:1.27", "imageID": image_id}
    assert status == {
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers", "True", at(2)), cond("Initialized", "True", at(0)),
                       cond("Ready", "False", at(0), "ContainersNotReady", unready),
                       cond("ContainersReady", "False", at(0), "ContainersNotReady", unready),
                       cond("PodScheduled", "True", at(0))],
        **base,
        "containerStatuses": [{**running, "state": {"running": {"startedAt": at(2)}}, "lastState": {}, "ready": False,
                               "restartCount": 0, "containerID": first_id, "started": True}],
        "qosClass": "BestEffort",
    }

    # Ready: the conditions turn True and carry neither reason nor message.
    await sim.advance(3)
    await eventually(lambda: sim.condition("web", "Ready") == "True")
    ready_conditions = [cond("PodReadyToStartContainers", "True", at(2)), cond("Initialized", "True", at(0)),
                        cond("Ready", "True", at(5)), cond("ContainersReady", "True", at(5)),
                        cond("PodScheduled", "True", at(0))]
    assert sim.status("web") == {
        "phase": "Running", "conditions": ready_conditions, **base,
        "containerStatuses": [{**running, "state": {"running": {"startedAt": at(2)}}, "lastState": {}, "ready": True,
                               "restartCount": 0, "containerID": first_id, "started": True}],
        "qosClass": "BestEffort",
    }

    # The container exits 1 after 5 s: CrashLoopBackOff, the dead run in lastState.
    await sim.advance(2)
    await eventually(lambda: "waiting" in sim.container("web")["state"])
    dead = {"exitCode": 1, "reason": "Error", "startedAt": at(2), "finishedAt": at(7), "containerID": first_id}
    assert sim.status("web") == {
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers", "True", at(2)), cond("Initialized", "True", at(0)),
                       cond("Ready", "False", at(7), "ContainersNotReady", unready),
                       cond("ContainersReady", "False", at(7), "ContainersNotReady", unready),
                       cond("PodScheduled", "True", at(0))],
        **base,
        "containerStatuses": [{**running, "state": {"waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off 1s restarting failed container=app pod=web_default({uid})"}},
            "lastState": {"terminated": dead}, "ready": False, "restartCount": 0, "containerID": first_id,
            "started": False}],
        "qosClass": "BestEffort",
    }

    # Restarted after the back-off: a new container, restartCount 1, the old run still in lastState.
    await sim.advance(CONFIG.crash_loop_base, step=1.0)
    await eventually(lambda: "running" in sim.container("web")["state"])
    second = sim.container("web")
    assert second["containerID"] != first_id
    assert sim.status("web")["containerStatuses"] == [
        {**running, "state": {"running": {"startedAt": at(8)}}, "lastState": {"terminated": dead}, "ready": False,
         "restartCount": 1, "containerID": second["containerID"], "started": True}]
    await sim.advance(3)
    await eventually(lambda: sim.condition("web", "Ready") == "True")
    assert sim.status("web")["conditions"] == [
        cond("PodReadyToStartContainers", "True", at(2)), cond("Initialized", "True", at(0)),
        cond("Ready", "True", at(11)), cond("ContainersReady", "True", at(11)), cond("PodScheduled", "True", at(0))]


@pytest.mark.parametrize(
    ("code", "phase", "reason", "initialized"),
    [pytest.param("0", "Succeeded", "Completed", cond("Initialized", "True", "T0", "PodCompleted"), id="succeeded"),
     pytest.param("2", "Failed", "Error", cond("Initialized", "True", "T0"), id="failed")],
)
async def test_full_status_of_a_finished_pod(sim: Sim, code: str, phase: str, reason: str,
                                             initialized: dict[str, Any]) -> None:
    t0 = sim.clock.now()
    sim.create_pod("task", annotations={"run-seconds": "4", "exit-code": code}, restart_policy="Never",
                   init=("setup",))
    await eventually(lambda: sim.phase("task") == "Running")
    status = sim.status("task")
    cid = status["containerStatuses"][0]["containerID"]
    init = status["initContainerStatuses"]
    await sim.advance(4)
    await eventually(lambda: sim.phase("task") == phase)
    status = sim.status("task")
    ts, te = format_time(t0), format_time(t0 + 4)
    terminal = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    assert status["conditions"] == [cond("PodReadyToStartContainers", "False", te),
                                    {**initialized, "lastTransitionTime": ts},
                                    cond("Ready", "False", te, terminal),
                                    cond("ContainersReady", "False", te, terminal),
                                    cond("PodScheduled", "True", ts)]
    assert status["containerStatuses"] == [{
        "name": "app",
        "state": {"terminated": {"exitCode": int(code), "reason": reason, "startedAt": ts, "finishedAt": te,
                                 "containerID": cid}},
        "lastState": {}, "ready": False, "restartCount": 0, "image": "docker.io/library/nginx:1.27",
        "imageID": status["containerStatuses"][0]["imageID"], "containerID": cid, "started": False}]
    assert status["initContainerStatuses"] == init
    assert init[0]["state"]["terminated"]["reason"] == "Completed"
    assert init[0]["ready"] is True
    assert status["podIP"]
    assert status["startTime"] == ts


async def test_init_containers_hold_the_pod_initializing(sim: Sim) -> None:
    sim.create_pod("init", annotations={"start-seconds": "5"}, init=("a-setup", "b-migrate"))
    await eventually(lambda: "initContainerStatuses" in sim.status("init"))
    status = sim.status("init")
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "False"
    assert initialized["reason"] == "ContainersNotInitialized"
    assert initialized["message"] == "containers with incomplete status: [a-setup b-migrate]"
    assert [c["state"] for c in status["initContainerStatuses"]] == [{"waiting": {"reason": "PodInitializing"}}] * 2
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    await sim.advance(5)
    await eventually(lambda: sim.condition("init", "Initialized") == "True")
    initialized = next(c for c in sim.status("init")["conditions"] if c["type"] == "Initialized")
    assert "reason" not in initialized
    assert "message" not in initialized


async def test_readiness_gate_holds_ready_and_foreign_conditions_stay_first(sim: Sim) -> None:
    spec = {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx:1.27"}],
            "readinessGates": [{"conditionType": "example.com/lb"}]}
    sim.api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lb", "namespace": "default"},
                          "spec": spec})
    await eventually(lambda: sim.condition("lb", "ContainersReady") == "True")
    ready = next(c for c in sim.status("lb")["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    assert ready["reason"] == "ReadinessGatesNotReady"
    assert ready["message"] == 'corresponding condition of pod readiness gate "example.com/lb" does not exist.'
    gate = {"type": "example.com/lb", "status": "False", "lastProbeTime": None,
            "lastTransitionTime": format_time(sim.clock.now())}
    sim.api.patch(PODS, "default", "lb", {"status": {"conditions": [gate]}}, "strategic", subresource="status")
    await eventually(lambda: "is not" in next(c for c in sim.status("lb")["conditions"]
                                              if c["type"] == "Ready").get("message", ""))
    assert next(c for c in sim.status("lb")["conditions"] if c["type"] == "Ready")["message"] == (
        'the status of pod readiness gate "example.com/lb" is not "True", but False')
    sim.api.patch(PODS, "default", "lb", {"status": {"conditions": [{**gate, "status": "True"}]}}, "strategic",
                  subresource="status")
    await eventually(lambda: sim.condition("lb", "Ready") == "True")
    conditions = sim.status("lb")["conditions"]
    assert [c["type"] for c in conditions] == ["example.com/lb", "PodReadyToStartContainers", "Initialized", "Ready",
                                               "ContainersReady", "PodScheduled"]
    assert "reason" not in conditions[3]
    assert "message" not in conditions[3]


async def test_resumed_kubelet_puts_back_what_others_wrote_over_its_fields(sim: Sim) -> None:
    sim.create_pod("steady")
    await eventually(lambda: sim.condition("steady", "Ready") == "True")
    sim.annotate_node("node-1", "stopped")
    await eventually(lambda: sim.kubelets.is_stopped("node-1"))
    # What the node lifecycle controller does to the pods of a node that stopped reporting.
    sim.api.patch(PODS, "default", "steady", {"status": {"conditions": [
        {"type": "Ready", "status": "False", "lastProbeTime": None,
         "lastTransitionTime": format_time(sim.clock.now())}]}}, "strategic", subresource="status")
    assert sim.condition("steady", "Ready") == "False"
    sim.annotate_node("node-1", "running")
    await eventually(lambda: sim.condition("steady", "Ready") == "True")
    ready = next(c for c in sim.status("steady")["conditions"] if c["type"] == "Ready")
    assert set(ready) == {"type", "status", "lastProbeTime", "lastTransitionTime"}
