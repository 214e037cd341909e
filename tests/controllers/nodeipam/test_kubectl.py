"""The node IPAM controller against kube-sim, judged by the real kubectl: Nodes registered without podCIDRs
(as real kubelets register them) get dual-stack, non-overlapping podCIDRs out of ``--cluster-cidr``, never in
the service range; an exhausted range leaves a Node without and records CIDRNotAvailable until a deleted
Node's CIDRs are freed; after a restart the allocations already on Nodes are recovered, not handed out twice."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import sys
from dataclasses import replace
from pathlib import Path

from controller_manager.api.resources import NODES, PODS
from controller_manager.controllers.nodeipam import NodeIpamController
from controller_manager.manager.rbac import rules_for
from controller_manager.sim.apiserver import requestinfo
from controller_manager.sim.apiserver.requestinfo import RequestInfo
from tests.controllers.harness import FAST_KUBELETS, Harness, controller_harness, wait_for
from tests.packaging.test_rbac_coverage import allows

TEST_REQUESTS = {("create", "nodes"), ("delete", "nodes"), ("get", "nodes"), ("list", "events")}  # and kubectl's
KUBECTL = Path(sys.executable).parent / "kubectl"
JSONPATH = 'jsonpath={range .items[*]}{.metadata.name}={.spec.podCIDRs}{"\\n"}{end}'

# 4 IPv4 /24s, one of them the service range: 3 nodes fit.
OPTIONS = {
    "allocate_node_cidrs": True,
    "cluster_cidr": "10.100.0.0/22,fd00:10::/112",
    "node_cidr_mask_size_ipv4": 24,
    "node_cidr_mask_size_ipv6": 120,
    "service_cluster_ip_range": "10.100.0.0/24",
}


async def kubectl(kubeconfig: Path, *args: str, timeout: float = 30.0) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), f"--kubeconfig={kubeconfig}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return out.decode()


async def pod_cidrs(h: Harness) -> dict[str, list[str]]:
    out = await kubectl(h.cluster.kubeconfig_path, "get", "nodes", "-o", JSONPATH)
    result = {}
    for line in out.splitlines():
        name, _, cidrs = line.partition("=")
        result[name] = json.loads(cidrs) if cidrs else []
    return result


async def pod_cidr(h: Harness, name: str) -> str:
    return await kubectl(h.cluster.kubeconfig_path, "get", "node", name, "-o", "jsonpath={.spec.podCIDR}")


def assert_disjoint(allocations: dict[str, list[str]]) -> None:
    nets = [ipaddress.ip_network(c) for cidrs in allocations.values() for c in cidrs]
    service = ipaddress.ip_network("10.100.0.0/24")
    for i, a in enumerate(nets):
        assert not (a.version == 4 and a.overlaps(service)), a  # type: ignore[arg-type]
        for b in nets[i + 1:]:
            assert a.version != b.version or not a.overlaps(b), (a, b)  # type: ignore[arg-type]


async def cidr_not_available(h: Harness, node: str) -> bool:
    out = await kubectl(h.cluster.kubeconfig_path, "get", "events", "-A", "--field-selector",
                        f"involvedObject.name={node},reason=CIDRNotAvailable", "-o",
                        'jsonpath={range .items[*]}{.type}|{.message}|{.source.component}{"\\n"}{end}')
    return f"Normal|Node {node} status is now: CIDRNotAvailable|cidrAllocator" in out.splitlines()


async def test_new_nodes_get_non_overlapping_pod_cidrs() -> None:
    seen: list[RequestInfo] = []

    def record(request: object) -> float:
        seen.append(requestinfo.parse(request.method, request.path, request.query))  # type: ignore[attr-defined]
        return 0.0

    kubelets = replace(FAST_KUBELETS, register_pod_cidr=False)
    async with controller_harness(NodeIpamController, nodes=2, kubelet_config=kubelets, options=OPTIONS,
                                  start=False) as h:
        h.cluster.faults.set_latency(record)
        sim_nodes = sorted(await pod_cidrs(h))
        await h.start()
        await h.client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "extra-1"}})

        async def three_allocated() -> bool:
            return sum(1 for c in (await pod_cidrs(h)).values() if c) == 3

        await wait_for(three_allocated, timeout=30, interval=0.2, what="three nodes with podCIDRs")
        allocations = await pod_cidrs(h)
        assert all(len(c) == 2 and ":" not in c[0] and ":" in c[1] for c in allocations.values()), allocations
        assert_disjoint(allocations)
        assert {await pod_cidr(h, n) for n in allocations} == {c[0] for c in allocations.values()}
        assert sorted(allocations) == sorted([*sim_nodes, "extra-1"])
        # the simulated kubelet gives its pods addresses out of the podCIDR its Node was assigned
        h.cluster.api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "nodeName": sim_nodes[0], "containers": [{"name": "c", "image": "registry.example/app:1"}]}}, "default")

        async def pod_ip_in_node_cidr() -> bool:
            ip = (h.cluster.api.get(PODS, "default", "p").get("status") or {}).get("podIP")
            return bool(ip) and ipaddress.ip_address(ip) in ipaddress.ip_network(allocations[sim_nodes[0]][0])

        await wait_for(pod_ip_in_node_cidr, timeout=30, interval=0.2, what="the pod's IP in its node's podCIDR")

        # the range is full: a fourth node waits, with CIDRNotAvailable
        await h.client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "extra-2"}})
        await wait_for(lambda: cidr_not_available(h, "extra-2"), timeout=30, interval=0.2,
                       what="CIDRNotAvailable on extra-2")
        assert (await pod_cidrs(h))["extra-2"] == []
        # deleting a node frees its CIDRs for the waiting one
        freed = allocations["extra-1"]
        await h.client.delete(NODES, "extra-1")

        async def extra_2_allocated() -> bool:
            # the only free IPv4 /24 is extra-1's; IPv6 moves on to the next free /120 after the last one given
            cidrs = (await pod_cidrs(h)).get("extra-2") or []
            return len(cidrs) == 2 and cidrs[0] == freed[0]

        await wait_for(extra_2_allocated, timeout=30, interval=0.2, what="extra-2 to get extra-1's CIDRs")

        # a restarted controller recovers the allocations on the nodes: nothing is handed out twice
        await h.restart()
        await h.client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "extra-3"}})
        await wait_for(lambda: cidr_not_available(h, "extra-3"), timeout=30, interval=0.2,
                       what="CIDRNotAvailable on extra-3 after the restart")
        before = await pod_cidrs(h)
        assert before["extra-3"] == []
        assert_disjoint(before)
        freed = before["extra-2"]
        await h.client.delete(NODES, "extra-2")

        async def extra_3_allocated() -> bool:
            cidrs = (await pod_cidrs(h)).get("extra-3") or []
            return len(cidrs) == 2 and cidrs[0] == freed[0]

        await wait_for(extra_3_allocated, timeout=30, interval=0.2, what="extra-3 to get the freed CIDRs")
        assert_disjoint(await pod_cidrs(h))
        h.cluster.faults.set_latency(None)

    # what it asked of the API server is in its ClusterRole (the test itself creates, deletes and gets nodes)
    resource_requests = [i for i in seen if i.is_resource and (i.verb, i.resource) not in TEST_REQUESTS]
    assert {("patch", "nodes"), ("watch", "nodes")} <= {(i.verb, i.resource) for i in resource_requests}
    rules = rules_for(["node-ipam-controller"])
    assert sorted({(i.verb, i.group, i.resource) for i in resource_requests if not allows(rules, i)}) == []
