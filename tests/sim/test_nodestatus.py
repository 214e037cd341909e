"""The addresses a simulated node registers with stay valid and distinct at Kubernetes' 5,000-node envelope."""

from __future__ import annotations

import ipaddress

from controller_manager.sim.nodestatus import node_ip, pod_cidr


def test_pod_cidrs_are_valid_and_distinct_for_every_node_of_a_large_cluster() -> None:
    assert pod_cidr(0) == "10.244.0.0/24"
    assert pod_cidr(3071) == "10.255.255.0/24"
    assert pod_cidr(3072) == "10.0.0.0/24"  # wraps round inside 10.0.0.0/8 instead of becoming 10.256.0.0
    cidrs = [ipaddress.ip_network(pod_cidr(i)) for i in range(20_000)]
    assert len(set(cidrs)) == len(cidrs)
    ips = [ipaddress.ip_address(node_ip(i)) for i in range(20_000)]
    assert len(set(ips)) == len(ips)
