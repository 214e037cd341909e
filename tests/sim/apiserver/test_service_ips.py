"""Services get their cluster IPs and IP families at create, as a single-stack IPv4 cluster's registry gives them."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import SERVICES
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.apiserver.errors import StatusError

NS = "default"


def service(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": [{"port": 80}], "selector": {"app": name}, **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}


def test_cluster_ips_are_allocated_in_order_and_never_twice(api: ApiServer) -> None:
    first = api.create(SERVICES, service("a"), NS)["spec"]
    second = api.create(SERVICES, service("b"), NS)["spec"]
    # .1 is the kubernetes Service's on a real cluster.
    assert (first["clusterIP"], second["clusterIP"]) == ("10.96.0.2", "10.96.0.3")
    assert first["clusterIPs"] == ["10.96.0.2"]
    assert first["ipFamilies"] == ["IPv4"]
    assert first["ipFamilyPolicy"] == "SingleStack"
    api.delete(SERVICES, NS, "a")
    assert api.create(SERVICES, service("c"), NS)["spec"]["clusterIP"] == "10.96.0.2"  # freed by the delete


def test_a_requested_cluster_ip_is_kept_if_free_and_in_range(api: ApiServer) -> None:
    assert api.create(SERVICES, service("a", clusterIP="10.96.100.7"), NS)["spec"]["clusterIPs"] == ["10.96.100.7"]
    with pytest.raises(StatusError) as taken:
        api.create(SERVICES, service("b", clusterIP="10.96.100.7"), NS)
    assert taken.value.status["code"] == 422
    assert "failed to allocate IP 10.96.100.7: provided IP is already allocated" in taken.value.status["message"]
    with pytest.raises(StatusError) as outside:
        api.create(SERVICES, service("c", clusterIP="192.168.0.1"), NS)
    assert "is not in the valid range. The range of valid IPs is 10.96.0.0/12" in outside.value.status["message"]


@pytest.mark.parametrize(("selector", "policy"), [
    pytest.param({"app": "db"}, "SingleStack", id="with-selector"),
    pytest.param(None, "RequireDualStack", id="without-selector"),
])
def test_headless_services(api: ApiServer, selector: dict[str, str] | None, policy: str) -> None:
    obj = service("db", clusterIP="None")
    if selector is None:
        del obj["spec"]["selector"]
    spec = api.create(SERVICES, obj, NS)["spec"]
    assert (spec["clusterIP"], spec["clusterIPs"], spec["ipFamilies"], spec["ipFamilyPolicy"]) == (
        "None", ["None"], ["IPv4"], policy)


def test_external_name_services_get_no_address(api: ApiServer) -> None:
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
           "spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    spec = api.create(SERVICES, obj, NS)["spec"]
    assert "clusterIP" not in spec
    assert "ipFamilies" not in spec


def test_ipv6_is_refused_on_an_ipv4_cluster(api: ApiServer) -> None:
    with pytest.raises(StatusError) as refused:
        api.create(SERVICES, service("v6", ipFamilies=["IPv6"]), NS)
    assert refused.value.status["code"] == 422
