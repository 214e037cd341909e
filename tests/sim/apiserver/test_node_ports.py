"""Node ports of NodePort and LoadBalancer Services, as a client sees them."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.sim.apiserver import node_ports
from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_kubectl import DEPLOYMENT, Kubectl, kubectl  # noqa: F401

SVCS = "/api/v1/namespaces/default/services"


def svc(name: str, kind: str = "NodePort", *ports: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": kind, "selector": {"app": name},
                                                 "ports": list(ports) or [{"port": 80}], **spec}}


async def test_node_port_allocated_in_range(client: Client) -> None:
    status, body = await client.post(SVCS, svc("a"))
    assert status == 201, body
    port = body["spec"]["ports"][0]["nodePort"]
    assert 30000 <= port <= 32767
    assert body["spec"]["externalTrafficPolicy"] == "Cluster"
    status, lb = await client.post(SVCS, svc("lb", "LoadBalancer", {"name": "a", "port": 80},
                                                 {"name": "b", "port": 443}))
    assert status == 201
    assert len({p["nodePort"] for p in lb["spec"]["ports"]} | {port}) == 3
    assert lb["status"] == {"loadBalancer": {}}


async def test_requested_port_taken_or_out_of_range(client: Client) -> None:
    status, body = await client.post(SVCS, svc("a", "NodePort", {"port": 80, "nodePort": 30001}))
    assert status == 201
    assert body["spec"]["ports"][0]["nodePort"] == 30001
    status, body = await client.post(SVCS, svc("b", "NodePort", {"port": 80, "nodePort": 30001}))
    assert status == 422
    assert body["message"] == ('Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 30001: provided port '
                               'is already allocated')
    status, body = await client.post(SVCS, svc("c", "NodePort", {"port": 80, "nodePort": 80}))
    assert status == 422
    assert body["message"] == ('Service "c" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is '
                               'not in the valid range. The range of valid ports is 30000-32767')


async def test_released_on_delete_and_on_type_change(client: Client) -> None:
    await client.post(SVCS, svc("a", "NodePort", {"port": 80, "nodePort": 30001}))
    assert (await client.delete(f"{SVCS}/a"))[0] == 200
    status, b = await client.post(SVCS, svc("b", "NodePort", {"port": 80, "nodePort": 30001}))
    assert status == 201, b
    status, b = await client.patch(f"{SVCS}/b", {"spec": {"type": "ClusterIP"}})
    assert status == 200, b
    assert "nodePort" not in b["spec"]["ports"][0]
    status, c = await client.post(SVCS, svc("c", "NodePort", {"port": 80, "nodePort": 30001}))
    assert status == 201, c


async def test_update_keeps_allocated_ports(client: Client) -> None:
    status, a = await client.post(SVCS, svc("a"))
    port = a["spec"]["ports"][0]["nodePort"]
    a["spec"]["ports"] = [{"port": 80, "protocol": "TCP"}]  # a client that leaves the node port out
    status, a = await client.put(f"{SVCS}/a", a)
    assert status == 200, a
    assert a["spec"]["ports"][0]["nodePort"] == port
    status, cip = await client.post(SVCS, svc("cip", "ClusterIP"))
    status, cip = await client.patch(f"{SVCS}/cip", {"spec": {"type": "NodePort"}})
    assert status == 200
    assert 30000 <= cip["spec"]["ports"][0]["nodePort"] <= 32767


async def test_cluster_ip_service_may_not_have_node_port(client: Client) -> None:
    status, body = await client.post(SVCS, svc("a", "ClusterIP", {"port": 80, "nodePort": 30005}))
    assert status == 422
    assert "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'" in body["message"]


async def test_load_balancer_without_node_ports_and_health_check(client: Client) -> None:
    status, body = await client.post(SVCS, svc("a", "LoadBalancer", allocateLoadBalancerNodePorts=False))
    assert status == 201
    assert "nodePort" not in body["spec"]["ports"][0]
    status, body = await client.post(SVCS, svc("b", "LoadBalancer", externalTrafficPolicy="Local"))
    assert status == 201
    assert 30000 <= body["spec"]["healthCheckNodePort"] <= 32767
    assert body["spec"]["healthCheckNodePort"] != body["spec"]["ports"][0]["nodePort"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=20))
def test_allocations_never_collide(port_counts: list[int]) -> None:
    held: set[int] = set()
    for i, count in enumerate(port_counts):
        obj = {"metadata": {"name": f"s{i}"}, "spec": {"type": "NodePort", "ports": [
            {"name": f"p{j}", "port": 80 + j} for j in range(count)]}}
        out = node_ports.assign(obj, None, held)
        mine = node_ports.held_by(out)
        assert len(mine) == count
        assert not mine & held
        assert all(node_ports.LOW <= p <= node_ports.HIGH for p in mine)
        held |= mine


async def test_kubectl_expose_node_port(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    out = await kubectl("expose", "deployment", "web", "--type=NodePort", "--port=80")
    assert out.strip() == "service/web exposed"
    got = json.loads(await kubectl("get", "svc", "web", "-o", "json"))
    assert got["spec"]["type"] == "NodePort"
    assert 30000 <= got["spec"]["ports"][0]["nodePort"] <= 32767
