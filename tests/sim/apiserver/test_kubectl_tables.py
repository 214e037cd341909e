"""The real kubectl's ``get`` against kube-sim: each kind's columns, ``-o wide``, ``-A``, ``--show-labels`` and
``-w``, with ages read from kube-sim's (fake) clock. Plus the Table answers as any client sees them over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller_manager.api.meta import format_micro_time, format_time
from controller_manager.api.resources import EVENTS_V1, JOBS, NODES, PODS, SERVICES
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions
from tests.sim.apiserver.conftest import Client, configmap
from tests.sim.apiserver.kubectl_harness import Kubectl, serve

TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
MANIFESTS = """
apiVersion: v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {disk: ssd}
      containers: [{name: a, image: agent:1}, {name: b, image: sidecar:2}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  timeZone: Europe/Paris
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: backup, image: backup:1}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  completions: 3
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1", b: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
type: Opaque
data: {t: eA==}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 25%
  selector: {matchLabels: {app: web}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader}
spec: {holderIdentity: node-1_1234}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.0.0.1]
- addresses: [10.0.0.2]
- addresses: [10.0.0.3]
- addresses: [10.0.0.4]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: readers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}
- {kind: Group, name: devs, apiGroup: rbac.authorization.k8s.io}
- {kind: ServiceAccount, name: robot, namespace: default}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
preemptionPolicy: Never
"""


class Sim:
    def __init__(self, api: ApiServer, clock: FakeClock, kubectl: Kubectl) -> None:
        self.api, self.clock, self.kubectl = api, clock, kubectl

    async def rows(self, *args: str) -> list[list[str]]:
        """``kubectl get`` output split into cells (columns are separated by 2+ spaces, cells may hold one)."""
        out = await self.kubectl("get", *args)
        return [[c.strip() for c in line.split("  ") if c.strip()] for line in out.splitlines() if line.strip()]


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Sim]:
    clock = FakeClock()
    api = ApiServer(clock=clock, options=ApiServerOptions())
    async with serve(api, tmp_path) as kubectl:
        yield Sim(api, clock, kubectl)


async def test_kinds_show_their_columns(sim: Sim) -> None:
    await sim.kubectl("apply", "-f", "-", stdin=MANIFESTS)
    start = sim.clock.now()
    sim.api.patch(JOBS, "default", "once", {"status": {"startTime": format_time(start), "succeeded": 1}}, "merge",
                  subresource="status")
    sim.clock.advance(3 * 3600 + 65)  # ages come from kube-sim's clock

    svc = await sim.rows("svc", "web")
    assert svc[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    cluster_ip = sim.api.get(SERVICES, "default", "web")["spec"]["clusterIP"]
    assert svc[1] == ["web", "ClusterIP", cluster_ip, "<none>", "80/TCP,53/UDP", "3h1m"]
    wide = await sim.rows("svc", "web", "-o", "wide")
    assert wide[0][-1] == "SELECTOR"
    assert wide[1][-1] == "app=web"

    assert await sim.rows("ds") == [
        ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"],
        ["agent", "0", "0", "0", "0", "0", "disk=ssd", "3h1m"]]
    assert (await sim.rows("ds", "-o", "wide"))[1][-3:] == ["a,b", "agent:1,sidecar:2", "app=agent"]
    assert await sim.rows("cronjob") == [
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"],
        ["nightly", "0 3 * * *", "Europe/Paris", "False", "0", "<none>", "3h1m"]]
    assert await sim.rows("job") == [
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], ["once", "Running", "1/3", "3h1m", "3h1m"]]
    assert await sim.rows("cm", "settings") == [["NAME", "DATA", "AGE"], ["settings", "2", "3h1m"]]
    assert await sim.rows("secret", "token") == [["NAME", "TYPE", "DATA", "AGE"], ["token", "Opaque", "1", "3h1m"]]
    assert await sim.rows("pdb") == [
        ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"], ["web", "N/A", "25%", "0", "3h1m"]]
    assert await sim.rows("lease", "leader") == [["NAME", "HOLDER", "AGE"], ["leader", "node-1_1234", "3h1m"]]
    assert await sim.rows("endpointslices", "web-abc") == [
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        ["web-abc", "IPv4", "8080", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "3h1m"]]
    assert await sim.rows("rolebinding", "readers", "-o", "wide") == [
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        ["readers", "ClusterRole/view", "3h1m", "alice", "devs", "default/robot"]]
    assert await sim.rows("priorityclass", "high") == [
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"], ["high", "1000", "false", "3h1m", "Never"]]
    await sim.kubectl("create", "role", "reader", "--verb=get", "--resource=pods")
    created = format_time(sim.clock.now())
    assert await sim.rows("role", "reader") == [["NAME", "CREATED AT"], ["reader", created]]


async def test_pods_nodes_all_namespaces_labels_and_watch(sim: Sim) -> None:
    sim.api.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "192.168.0.10"}],
                   "nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "Sim OS", "kernelVersion": "6.1",
                                "containerRuntimeVersion": "sim://1"}}})
    await sim.kubectl("create", "namespace", "team")
    await sim.kubectl("create", "-f", "-", stdin="""apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team, labels: {app: p}}
spec:
  nodeName: node-1
  containers: [{name: c, image: nginx}]
""")
    sim.clock.advance(30 * 60)
    restart = format_time(sim.clock.now() - 90)
    sim.api.patch(PODS, "team", "p", {"status": {
        "phase": "Running", "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}],
        "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": False, "restartCount": 4,
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                               "lastState": {"terminated": {"exitCode": 1, "finishedAt": restart}}}]}},
        "merge", subresource="status")

    nodes = await sim.rows("nodes", "-o", "wide")
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                        "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert nodes[1] == ["node-1", "Ready", "control-plane", "30m", "v1.37.0", "192.168.0.10", "<none>", "Sim OS",
                        "6.1", "sim://1"]
    pods = await sim.rows("pods", "-A", "--show-labels")
    assert pods[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"]
    assert pods[1] == ["team", "p", "0/1", "CrashLoopBackOff", "4 (90s ago)", "30m", "app=p"]
    wide = await sim.rows("pods", "-n", "team", "-o", "wide")
    assert wide[0][-4:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert wide[1][-4:] == ["10.1.0.5", "node-1", "<none>", "<none>"]

    sim.api.create(EVENTS_V1, {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1"},
                               "eventTime": format_micro_time(sim.clock.now() - 20), "type": "Warning",
                               "reason": "BackOff", "action": "Restarting", "note": "Back-off restarting",
                               "reportingController": "kubelet", "reportingInstance": "node-1",
                               "regarding": {"kind": "Pod", "namespace": "team", "name": "p"}}, "team")
    assert await sim.rows("events.events.k8s.io", "-n", "team") == [
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], ["20s", "Warning", "BackOff", "pod/p",
                                                               "Back-off restarting"]]

    watch = await sim.kubectl.start("get", "configmaps", "-w")
    assert watch.stdout is not None
    try:
        await sim.kubectl("create", "configmap", "first", "--from-literal=a=1")
        header = await asyncio.wait_for(watch.stdout.readline(), 10)
        assert header.split() == [b"NAME", b"DATA", b"AGE"]
        lines = [await asyncio.wait_for(watch.stdout.readline(), 10)]
        while b"first" not in lines[-1]:
            lines.append(await asyncio.wait_for(watch.stdout.readline(), 10))
        assert lines[-1].split() == [b"first", b"1", b"0s"]
        await sim.kubectl("create", "configmap", "second", "--from-literal=a=1", "--from-literal=b=2")
        assert (await asyncio.wait_for(watch.stdout.readline(), 10)).split() == [b"second", b"2", b"0s"]
    finally:
        watch.kill()
        await watch.wait()


# --- over HTTP ------------------------------------------------------------------------------------------

async def test_list_pages_and_get_answer_tables(client: Client) -> None:
    for name in ("a", "b", "c"):
        assert (await client.post("/api/v1/namespaces/default/configmaps", configmap(name)))[0] == 201
    status, first = await client.get("/api/v1/namespaces/default/configmaps", headers=TABLE,
                                      params={"limit": "2"})
    assert status == 200
    assert [c["name"] for c in first["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert [r["cells"][0] for r in first["rows"]] == ["a", "b"]
    assert first["metadata"]["continue"]
    assert first["metadata"]["remainingItemCount"] == 1
    assert first["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    # every page of a list is a whole Table, columns included (TableOptions.noHeaders is not a query parameter)
    _, second = await client.get("/api/v1/namespaces/default/configmaps", headers=TABLE,
                                 params={"limit": "2", "continue": first["metadata"]["continue"],
                                         "includeObject": "None"})
    assert second["columnDefinitions"] == first["columnDefinitions"]
    assert second["rows"] == [{"cells": ["c", 1, "0s"], "object": None}]
    _, one = await client.get("/api/v1/namespaces/default/configmaps/a", headers=TABLE,
                              params={"includeObject": "Object"})
    assert one["rows"][0]["object"]["data"] == {"k": "v"}
    assert one["metadata"]["resourceVersion"] == one["rows"][0]["object"]["metadata"]["resourceVersion"]
    status, bad = await client.get("/api/v1/namespaces/default/configmaps", headers=TABLE,
                                   params={"includeObject": "unrecognized"})
    assert status == 400
    assert bad["reason"] == "BadRequest"


async def test_watch_sends_columns_once_and_honours_include_object(client: Client) -> None:
    assert (await client.post("/api/v1/namespaces/default/configmaps", configmap("w1")))[0] == 201
    assert (await client.post("/api/v1/namespaces/default/configmaps", configmap("w2")))[0] == 201
    resp = await client.tc.get("/api/v1/namespaces/default/configmaps",
                               params={"watch": "true", "resourceVersion": "0", "includeObject": "None"},
                               headers={**TABLE, "Authorization": "Bearer admin-token"})
    assert resp.status == 200
    events: list[Any] = []
    while len(events) < 2:
        events.append(orjson.loads(await asyncio.wait_for(resp.content.readline(), 5)))
    resp.close()
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert [c["name"] for c in events[0]["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert events[1]["object"]["columnDefinitions"] is None
    assert events[1]["object"]["rows"] == [{"cells": ["w2", 1, "0s"], "object": None}]
    assert events[1]["object"]["metadata"]["resourceVersion"]


async def test_scale_subresource_table(client: Client) -> None:
    from tests.sim.apiserver.conftest import deployment

    assert (await client.post("/apis/apps/v1/namespaces/default/deployments", deployment("web", 3)))[0] == 201
    status, doc = await client.get("/apis/apps/v1/namespaces/default/deployments/web/scale", headers=TABLE)
    assert status == 200
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Desired", "Available", "Age"]
    assert doc["rows"][0]["cells"] == ["web", 3, 0, "0s"]
