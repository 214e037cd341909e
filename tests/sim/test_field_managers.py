"""kube-sim's own components write under their real field managers: kubelet for nodes, leases, pod status
and its events; kube-scheduler for unschedulable conditions and its events; binding records nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller_manager.api.resources import EVENTS, LEASES, NODES, PODS
from controller_manager.sim.cluster import SimCluster
from controller_manager.sim.kubelet import KubeletConfig

from .test_cluster import eventually

FAST = KubeletConfig(node_status_update_frequency=0.2, lease_renew_interval=0.2)


def _managers(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(e["manager"], e["operation"], e.get("subresource", "")) for e in obj["metadata"].get("managedFields", [])}


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=1, kubelet_config=FAST) as c:
        yield c


async def test_kubelet_and_scheduler_managers(cluster: SimCluster) -> None:
    api = cluster.api
    node = api.list(NODES)[0][0]
    assert ("kubelet", "Update", "") in _managers(node)
    lease = api.get(LEASES, "kube-node-lease", node["metadata"]["name"])
    assert _managers(lease) == {("kubelet", "Update", "")}

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    api.create(PODS, pod, "default", field_manager="kube-controller-manager")

    def running() -> bool:
        return bool(api.get(PODS, "default", "p")["status"].get("phase") == "Running")

    await eventually(running)
    managers = _managers(api.get(PODS, "default", "p"))
    # Binding is no write of a field manager's; the kubelet owns the status it reports.
    assert managers == {("kube-controller-manager", "Update", ""), ("kubelet", "Update", "status")}
    status_fields = next(e for e in api.get(PODS, "default", "p")["metadata"]["managedFields"]
                         if e["manager"] == "kubelet")["fieldsV1"]
    assert set(status_fields["f:status"]) >= {"f:conditions", "f:containerStatuses", "f:phase", "f:podIP"}

    big = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"},
           "spec": {"containers": [{"name": "c", "image": "nginx",
                                    "resources": {"requests": {"cpu": "1000"}}}]}}
    api.create(PODS, big, "default", field_manager="kube-controller-manager")
    await eventually(lambda: ("kube-scheduler", "Update", "status") in _managers(api.get(PODS, "default", "big")))
    events, _ = api.list(EVENTS, "default")
    by_reason = {e["reason"]: _managers(e) for e in events}
    assert by_reason["FailedScheduling"] == {("kube-scheduler", "Update", "")}
    assert by_reason["Started"] == {("kubelet", "Update", "")}
