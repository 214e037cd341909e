"""The endpoint helpers both endpoint controllers share: upstream's tables from
``pkg/controller/util/endpoint/controller_utils_test.go`` (TestDetermineNeededServiceUpdates, Test_podChanged,
TestServiceSelectorCache_GetPodServiceMemberships, TestShouldSetHostname), ``pkg/api/v1/pod/util_test.go``
(TestFindPort) and ``k8s.io/utils/net`` (TestParseIPSloppy over ``goodTestIPs``/``badTestIPs``)."""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Callable
from typing import Any

import pytest

from controller_manager.controllerutil.endpoints import (
    PortNotFound,
    determine_needed_service_updates,
    find_port,
    get_pod_service_memberships,
    get_services_to_update_on_pod_change,
    parse_ip_sloppy,
    pod_endpoints_changed,
    should_set_hostname,
)

# --- TestDetermineNeededServiceUpdates ---------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "union", "xor"), [
    pytest.param({"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}, set(), id="no services changed"),
    pytest.param({"a", "b", "c"}, {"d", "e", "f"}, {"a", "b", "c", "d", "e", "f"}, {"a", "b", "c", "d", "e", "f"},
                 id="all old services removed, new services added"),
    pytest.param({"a", "b", "c"}, set(), {"a", "b", "c"}, {"a", "b", "c"},
                 id="all old services removed, no new services added"),
    pytest.param(set(), {"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"},
                 id="no old services, but new services added"),
    pytest.param({"a", "b", "c"}, {"b", "c", "d"}, {"a", "b", "c", "d"}, {"a", "d"},
                 id="one service removed, one service added, two unchanged"),
    pytest.param(set(), set(), set(), set(), id="no services"),
])
def test_determine_needed_service_updates(a: set[str], b: set[str], union: set[str], xor: set[str]) -> None:
    assert determine_needed_service_updates(a, b, pod_changed=False) == xor
    assert determine_needed_service_updates(a, b, pod_changed=True) == union


# --- Test_podChanged ----------------------------------------------------------------------------------------

ORIG_POD: dict[str, Any] = {
    "metadata": {"namespace": "test", "name": "pod", "labels": {"foo": "bar"}},
    "status": {"conditions": [{"type": "Ready", "status": "False"}]},
}


def _ips(pod: dict[str, Any], *ips: str) -> None:
    pod["status"]["podIP"] = ips[0]
    pod["status"]["podIPs"] = [{"ip": ip} for ip in ips]


Modifier = Callable[[dict[str, Any], dict[str, Any]], None]


def _no_change(old: dict[str, Any], new: dict[str, Any]) -> None:
    pass


POD_CHANGES: list[Any] = [
    pytest.param(_no_change, False, False, id="no changes"),
    # NodeName can only change before the pod has an IP: ignored.
    pytest.param(lambda o, n: n.setdefault("spec", {}).update(nodeName="changed"), False, False,
                 id="change NodeName"),
    pytest.param(lambda o, n: n["metadata"].update(resourceVersion="changed"), False, False,
                 id="change ResourceVersion"),
    pytest.param(lambda o, n: _ips(n, "1.2.3.4"), True, False, id="add primary IPv4"),
    pytest.param(lambda o, n: (_ips(o, "1.2.3.4"), _ips(n, "2.3.4.5")), True, False, id="modify primary IPv4"),
    pytest.param(lambda o, n: _ips(n, "fd00:10:96::1"), True, False, id="add primary IPv6"),
    pytest.param(lambda o, n: (_ips(o, "fd00:10:96::1"), _ips(n, "fd00:10:96::2")), True, False,
                 id="modify primary IPv6"),
    pytest.param(lambda o, n: (_ips(o, "1.2.3.4"), _ips(n, "1.2.3.4", "fd00:10:96::1")), True, False,
                 id="add secondary IP"),
    pytest.param(lambda o, n: (_ips(o, "1.2.3.4", "fd00:10:96::1"), _ips(n, "1.2.3.4", "fd00:10:96::2")), True,
                 False, id="modify secondary IP"),
    pytest.param(lambda o, n: (_ips(o, "1.2.3.4", "fd00:10:96::1"), _ips(n, "1.2.3.4")), True, False,
                 id="remove secondary IP"),
    pytest.param(lambda o, n: n["status"]["conditions"][0].update(status="True"), True, False,
                 id="change readiness"),
    pytest.param(lambda o, n: n["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z"), True, False,
                 id="mark for deletion"),
    # Upstream compares the two deletionTimestamp pointers, never equal for two informer objects.
    pytest.param(lambda o, n: (o["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z"),
                               n["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z")), True, False,
                 id="any update of a terminating pod"),
    pytest.param(lambda o, n: n["metadata"]["labels"].update(label="new"), False, True, id="add label"),
    pytest.param(lambda o, n: (o["metadata"]["labels"].update(label="old"),
                               n["metadata"]["labels"].update(label="new")), False, True, id="modify label"),
    pytest.param(lambda o, n: o["metadata"]["labels"].update(label="old"), False, True, id="remove label"),
    pytest.param(lambda o, n: n.setdefault("spec", {}).update(hostname="h"), False, True, id="change hostname"),
    pytest.param(lambda o, n: n.setdefault("spec", {}).update(subdomain="s"), False, True, id="change subdomain"),
]


@pytest.mark.parametrize(("modifier", "pod_changed", "labels_changed"), POD_CHANGES)
def test_pod_endpoints_changed(modifier: Modifier, pod_changed: bool, labels_changed: bool) -> None:
    old = copy.deepcopy(ORIG_POD)
    new = copy.deepcopy(old)
    modifier(old, new)
    assert pod_endpoints_changed(old, new) == (pod_changed, labels_changed)


# --- TestServiceSelectorCache_GetPodServiceMemberships ---------------------------------------------------------

SERVICES = [{"metadata": {"name": f"service-{i}", "namespace": "test"}, "spec": {"selector": {"app": f"test-{i}"}}}
            for i in range(3)]


@pytest.mark.parametrize(("i", "expected"), [
    (0, {"test/service-0"}), (1, {"test/service-1"}), (2, {"test/service-2"}), (3, set()), (4, set()),
])
def test_get_pod_service_memberships(i: int, expected: set[str]) -> None:
    assert get_pod_service_memberships(SERVICES, {"app": f"test-{i}", "label": f"label-{i}"}) == expected


def test_a_service_without_a_selector_selects_nothing_and_an_empty_one_everything() -> None:
    services = [{"metadata": {"name": "none", "namespace": "test"}, "spec": {}},
                {"metadata": {"name": "all", "namespace": "test"}, "spec": {"selector": {}}},
                {"metadata": {"name": "empty-value", "namespace": "test"}, "spec": {"selector": {"x": ""}}}]
    assert get_pod_service_memberships(services, {"app": "a"}) == {"test/all"}
    assert get_pod_service_memberships(services, {"x": ""}) == {"test/all", "test/empty-value"}


# --- GetServicesToUpdateOnPodChange -----------------------------------------------------------------------------

def _pod(rv: str, labels: dict[str, str], ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"namespace": "test", "name": "p", "resourceVersion": rv, "labels": labels},
            "status": {"podIP": "1.2.3.4", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def _services_in(namespace: str) -> list[dict[str, Any]]:
    return [s for s in SERVICES if s["metadata"]["namespace"] == namespace]


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(_pod("1", {"app": "test-0"}), _pod("1", {"app": "test-1"}, ready=False), set(),
                 id="a resync (same resourceVersion) changes nothing"),
    pytest.param(_pod("1", {"app": "test-0"}), _pod("2", {"app": "test-0"}), set(), id="nothing that matters"),
    pytest.param(_pod("1", {"app": "test-0"}), _pod("2", {"app": "test-0"}, ready=False), {"test/service-0"},
                 id="readiness: the Services selecting it"),
    pytest.param(_pod("1", {"app": "test-0"}), _pod("2", {"app": "test-1"}), {"test/service-0", "test/service-1"},
                 id="labels only: the Services it left and joined"),
    pytest.param(_pod("1", {"app": "test-0", "x": "y"}), _pod("2", {"app": "test-0"}), set(),
                 id="labels only, the same Services: none"),
    pytest.param(_pod("1", {"app": "test-0", "x": "y"}), _pod("2", {"app": "test-0"}, ready=False),
                 {"test/service-0"}, id="labels and readiness: every Service of either"),
])
def test_get_services_to_update_on_pod_change(old: dict[str, Any], new: dict[str, Any], expected: set[str]) -> None:
    assert get_services_to_update_on_pod_change(_services_in, old, new) == expected


# --- TestShouldSetHostname ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("pod_ns", "hostname", "subdomain", "svc_ns", "svc_name", "expected"), [
    pytest.param("ns", "foo", "svc-name", "ns", "svc-name", True, id="all matching"),
    pytest.param("ns", "", "svc-name", "ns", "svc-name", False, id="all matching, hostname not set"),
    pytest.param("ns", "hostname", "subdomain", "ns", "name", False, id="all set, different name/subdomain"),
    pytest.param("ns1", "hostname", "svc-name", "ns2", "svc-name", False, id="all set, different namespace"),
])
def test_should_set_hostname(pod_ns: str, hostname: str, subdomain: str, svc_ns: str, svc_name: str,
                             expected: bool) -> None:
    pod = {"metadata": {"namespace": pod_ns}, "spec": {"hostname": hostname, "subdomain": subdomain}}
    service = {"metadata": {"namespace": svc_ns, "name": svc_name}}
    assert should_set_hostname(pod, service) is expected


# --- TestFindPort --------------------------------------------------------------------------------------------------

def _ports(*ports: tuple[str, int, str]) -> dict[str, Any]:
    return {"ports": [{"name": name, "containerPort": number, "protocol": protocol}
                      for name, number, protocol in ports]}


THREE_PORTS = _ports(("", 11, "UDP"), ("p", 22, "TCP"), ("q", 33, "TCP"))

FIND_PORT_CASES = [
    pytest.param([{}], 93, 93, id="valid int, no ports"),
    pytest.param([_ports(("", 11, "TCP"), ("p", 22, "TCP"))], 93, 93, id="valid int, with ports"),
    pytest.param([{}], "p", None, id="valid str, no ports"),
    pytest.param([THREE_PORTS], "q", 33, id="valid str, one ctr with ports"),
    pytest.param([{}, THREE_PORTS], "q", 33, id="valid str, two ctr with ports"),
    pytest.param([{}, _ports(("", 11, "UDP"), ("p", 22, "TCP"), ("q", 22, "TCP"))], "q", 22,
                 id="valid str, two ctr with same port"),
    pytest.param([{}, _ports(("a", 11, "snmp"))], "a", None, id="valid str, invalid protocol"),
    pytest.param([{}, {"ports": [{"name": "a", "containerPort": 11, "hostPort": 81, "protocol": "TCP"}]}], "a", 11,
                 id="valid hostPort"),
    pytest.param([{}, {"ports": [{"name": "a", "containerPort": 11, "hostPort": -1, "protocol": "TCP"}]}], "a", 11,
                 id="invalid hostPort"),
    pytest.param([{}, _ports(("a", -1, "TCP"))], "a", -1, id="invalid ContainerPort"),
    pytest.param([{}, {"ports": [{"name": "a", "containerPort": 11, "hostIP": "192.168.1.1", "protocol": "TCP"}]}],
                 "a", 11, id="HostIP Address"),
]


@pytest.mark.parametrize(("containers", "target", "expected"), FIND_PORT_CASES)
def test_find_port(containers: list[dict[str, Any]], target: int | str, expected: int | None) -> None:
    pod = {"metadata": {"uid": "pod-uid"}, "spec": {"containers": containers}}
    service_port = {"protocol": "TCP", "targetPort": target}
    if expected is None:
        with pytest.raises(PortNotFound, match=r"^no suitable port for manifest: pod-uid$"):
            find_port(pod, service_port)
    else:
        assert find_port(pod, service_port) == expected


@pytest.mark.parametrize(("restart_policy", "expected"), [
    pytest.param("Always", 80, id="a sidecar's port is found"),
    pytest.param(None, None, id="a plain init container's port is not"),
])
def test_find_port_in_sidecars(restart_policy: str | None, expected: int | None) -> None:
    init: dict[str, Any] = {"name": "init", **_ports(("http", 80, "TCP"))}
    if restart_policy is not None:
        init["restartPolicy"] = restart_policy
    pod = {"metadata": {"uid": "u"}, "spec": {"containers": [{}], "initContainers": [init]}}
    service_port = {"protocol": "TCP", "targetPort": "http"}
    if expected is None:
        with pytest.raises(PortNotFound):
            find_port(pod, service_port)
    else:
        assert find_port(pod, service_port) == expected


def test_find_port_without_target_port_is_go_zero_int_or_string() -> None:
    assert find_port({"spec": {}}, {"port": 80, "protocol": "TCP"}) == 0


def test_find_port_compares_protocols_as_given() -> None:
    pod = {"metadata": {"uid": "u"}, "spec": {"containers": [{"ports": [{"name": "a", "containerPort": 1}]}]}}
    with pytest.raises(PortNotFound):
        find_port(pod, {"protocol": "TCP", "targetPort": "a"})
    assert find_port(pod, {"targetPort": "a"}) == 1


# --- TestParseIPSloppy (k8s.io/utils/net ips_test.go) ----------------------------------------------------------------

GOOD_IPS = [
    pytest.param("192.168.0.5", ["192.168.0.5", "192.168.000.005"], id="IPv4"),
    pytest.param("0.0.0.0", ["0.0.0.0", "000.000.000.000"], id="IPv4 all-zeros"),
    pytest.param("255.255.255.255", ["255.255.255.255"], id="IPv4 broadcast"),
    pytest.param("2001:db8::5", ["2001:db8::5", "2001:0db8::0005", "2001:DB8::5"], id="IPv6"),
    pytest.param("::", ["::", "0:0:0:0:0:0:0:0", "0000:0000:0000:0000:0000:0000:0000:0000", "0::0"],
                 id="IPv6 all-zeros"),
    pytest.param("::1", ["::1", "0000:0000:0000:0000:0000:0000:0000:0001"], id="IPv6 loopback"),
    pytest.param("192.168.0.5", ["192.168.0.5", "::ffff:192.168.0.5", "::ffff:0192.0168.0000.0005"],
                 id="IPv4-mapped IPv6"),
]


@pytest.mark.parametrize(("canonical", "strings"), GOOD_IPS)
def test_parse_ip_sloppy_good(canonical: str, strings: list[str]) -> None:
    for text in strings:
        ip = parse_ip_sloppy(text)
        assert ip is not None, text
        assert ip == ipaddress.ip_address(canonical)
        assert str(ip) == canonical


BAD_IPS = [
    pytest.param([""], id="empty string is not an IP"),
    pytest.param(["bad ip"], id="random non-IP string is not an IP"),
    pytest.param(["www.example.com"], id="domain name is not an IP"),
    pytest.param(["1.2.3.400", "1.2..4", "1.2.3", "1.2.3.4.5"], id="mangled IPv4 addresses are invalid"),
    pytest.param(["1:2::12345", "1::2::3", "1:2:::3", "1:2:3", "1:2:3:4:5:6:7:8:9", "1:2:3:4::6:7:8:9"],
                 id="mangled IPv6 addresses are invalid"),
    pytest.param(["1.2.3.4:80", "[2001:db8::5]", "[2001:db8::5]:80", "www.example.com:80"],
                 id="IPs do not have ports or brackets"),
    pytest.param(["169.254.169.254%eth0", "fe80::1234%eth0"], id="IPs with zones are invalid"),
    pytest.param(["1.2.3.0/24", "2001:db8::/64"], id="CIDR strings are not IPs"),
    pytest.param([" 1.2.3.4", "1.2.3.4 ", " 2001:db8::5", "2001:db8::5 "], id="IPs with whitespace are invalid"),
]


@pytest.mark.parametrize("strings", BAD_IPS)
def test_parse_ip_sloppy_bad(strings: list[str]) -> None:
    for text in strings:
        assert parse_ip_sloppy(text) is None, text


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("0000000001.2.3.4", "1.2.3.4", id="any number of leading zeros in an octet"),
    pytest.param("2001:00000db8::1", "2001:db8::1", id="any number of leading zeros in a field"),
    pytest.param("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0", id="a trailing :: for one group"),
    pytest.param("::1.2.3.4", "::102:304", id="an embedded IPv4 after ::"),
    pytest.param("1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304", id="an embedded IPv4 in the last two groups"),
])
def test_parse_ip_sloppy_go_16_forms(text: str, expected: str) -> None:
    ip = parse_ip_sloppy(text)
    assert ip is not None
    assert str(ip) == expected


@pytest.mark.parametrize("text", [
    pytest.param(":1::2", id="a single leading colon"),
    pytest.param("1::2:", id="a single trailing colon"),
    pytest.param("1.2.3.4::", id="an IPv4 part before ::"),
    pytest.param("1:2:3:4:5:6:7:8::", id="eight groups and ::"),
    pytest.param("1:2:3:4:5:1.2.3.4", id="an embedded IPv4 in the wrong place"),
    pytest.param("1.2.3.٤", id="non-ASCII digits"),
])
def test_parse_ip_sloppy_go_16_refusals(text: str) -> None:
    assert parse_ip_sloppy(text) is None
