"""Subset packing, order, truncation and comparison: upstream's TestPackSubsets (pkg/api/v1/endpoints), and
TestTruncateEndpoints / TestEndpointSubsetsEqualIgnoreResourceVersion (pkg/controller/endpoint)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from controller_manager.api.endpoints import repack_subsets, sort_subsets, spew_port, spew_subset
from controller_manager.controllers.endpoint.subsets import (
    subsets_equal_ignoring_resource_version,
    truncate_subsets,
)

Obj = dict[str, Any]


def addr(ip: str, uid: str | None = None) -> Obj:
    a: Obj = {"ip": ip}
    if uid is not None:
        a["targetRef"] = {"uid": uid}
    return a


def port(number: int, name: str = "", protocol: str = "TCP") -> Obj:
    p: Obj = {"port": number, "protocol": protocol}
    if name:
        p["name"] = name
    return p


def subset(ready: list[Obj] | None = None, not_ready: list[Obj] | None = None, ports: list[Obj] | None = None) -> Obj:
    s: Obj = {}
    if ready is not None:
        s["addresses"] = ready
    if not_ready is not None:
        s["notReadyAddresses"] = not_ready
    if ports is not None:
        s["ports"] = ports
    return s


@pytest.mark.parametrize(("given", "expect"), [
    pytest.param([], [], id="empty everything"),
    pytest.param([subset([], None, [port(111)])], [], id="empty addresses"),
    pytest.param([subset([addr("1.2.3.4")], None, [])], [subset([addr("1.2.3.4")])], id="empty ports"),
    pytest.param([subset(None, [addr("1.2.3.4")], [])], [subset(None, [addr("1.2.3.4")])],
                 id="empty ports, not ready"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)])], [subset([addr("1.2.3.4")], None, [port(111)])],
                 id="one set, one ip, one port"),
    pytest.param([subset([addr("beef::1:2:3:4")], None, [port(111)])],
                 [subset([addr("beef::1:2:3:4")], None, [port(111)])], id="one set, one ip, one port (IPv6)"),
    pytest.param([subset(None, [addr("1.2.3.4")], [port(111)])], [subset(None, [addr("1.2.3.4")], [port(111)])],
                 id="one set, one notReady ip, one port"),
    pytest.param([subset([addr("1.2.3.4", "uid-1")], None, [port(111)])],
                 [subset([addr("1.2.3.4", "uid-1")], None, [port(111)])], id="one set, one ip, one UID, one port"),
    pytest.param([subset([addr("1.2.3.4"), addr("5.6.7.8")], None, [port(111)])],
                 [subset([addr("1.2.3.4"), addr("5.6.7.8")], None, [port(111)])], id="one set, two ips, one port"),
    pytest.param([subset([addr("1.2.3.4")], [addr("5.6.7.8")], [port(111)])],
                 [subset([addr("1.2.3.4")], [addr("5.6.7.8")], [port(111)])], id="one set, two mixed ips, one port"),
    pytest.param([subset([addr("1.2.3.4")], [addr("1.2.3.4")], [port(111)])],
                 [subset(None, [addr("1.2.3.4")], [port(111)])],
                 id="one set, two duplicate ips, one port, notReady is covered by ready"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111), port(222)])],
                 [subset([addr("1.2.3.4")], None, [port(111), port(222)])], id="one set, one ip, two ports"),
    pytest.param([subset([addr("1.2.3.4"), addr("1.2.3.4")], None, [port(111)])],
                 [subset([addr("1.2.3.4")], None, [port(111)])], id="one set, dup ips, one port"),
    pytest.param([subset([addr("1.2.3.4", "uid-1"), addr("1.2.3.4", "uid-2")], None, [port(111)])],
                 [subset([addr("1.2.3.4", "uid-1"), addr("1.2.3.4", "uid-2")], None, [port(111)])],
                 id="one set, dup ips with target-refs, one port"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)]), subset([addr("1.2.3.4")], None, [port(222)])],
                 [subset([addr("1.2.3.4")], None, [port(111), port(222)])], id="two sets, dup ip, two ports"),
    pytest.param([subset([addr("1.2.3.4", "uid-1")], None, [port(111)]),
                  subset([addr("1.2.3.4", "uid-1")], None, [port(222)])],
                 [subset([addr("1.2.3.4", "uid-1")], None, [port(111), port(222)])],
                 id="two sets, dup ip, dup uid, two ports"),
    pytest.param([subset([addr("1.2.3.4", "uid-1")], None, [port(111)]),
                  subset([addr("1.2.3.4", "uid-2")], None, [port(222)])],
                 [subset([addr("1.2.3.4", "uid-1")], None, [port(111)]),
                  subset([addr("1.2.3.4", "uid-2")], None, [port(222)])],
                 id="two sets, dup ip, different uids, two ports"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)]), subset([addr("5.6.7.8")], None, [port(111)])],
                 [subset([addr("1.2.3.4"), addr("5.6.7.8")], None, [port(111)])], id="two sets, two ips, dup port"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)]), subset(None, [addr("5.6.7.8")], [port(111)])],
                 [subset([addr("1.2.3.4")], [addr("5.6.7.8")], [port(111)])],
                 id="two sets, two mixed ips, dup port"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)]), subset([addr("5.6.7.8")], None, [port(222)])],
                 [subset([addr("1.2.3.4")], None, [port(111)]), subset([addr("5.6.7.8")], None, [port(222)])],
                 id="two sets, two ips, two ports"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)]), subset(None, [addr("1.2.3.4")], [port(222)])],
                 [subset([addr("1.2.3.4")], None, [port(111)]), subset(None, [addr("1.2.3.4")], [port(222)])],
                 id="two sets, one ip ready for one port and not the other"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(111)]), subset([addr("1.2.3.5")], None, [port(222)]),
                  subset([addr("1.2.3.6")], None, [port(111)]), subset([addr("1.2.3.5")], None, [port(333)])],
                 [subset([addr("1.2.3.4"), addr("1.2.3.6")], None, [port(111)]),
                  subset([addr("1.2.3.5")], None, [port(222), port(333)])], id="four sets, three ips, three ports"),
    pytest.param([subset([addr("1.2.3.4")], None, [port(0)])], [subset([addr("1.2.3.4")])],
                 id="port 0 groups like no port"),
])
def test_pack_subsets(given: list[Obj], expect: list[Obj]) -> None:
    """TestPackSubsets: the result is the expected subsets in canonical order."""
    before = copy.deepcopy(given)
    assert repack_subsets(given) == sort_subsets(expect)
    assert given == before  # inputs untouched


def test_repack_is_independent_of_input_order() -> None:
    subsets = [subset([addr(f"10.0.0.{i}", f"u{i}")], None, [port(80 + i % 3, f"p{i % 3}")]) for i in range(12)]
    assert repack_subsets(subsets) == repack_subsets(list(reversed(subsets)))


def test_spew_text() -> None:
    """The text upstream hashes to order ports and subsets (go-spew, ``%#v``, methods disabled)."""
    assert spew_port({"name": "http", "port": 8080, "protocol": "TCP"}) == (
        "(v1.EndpointPort){Name:(string)http Port:(int32)8080 Protocol:(v1.Protocol)TCP AppProtocol:(*string)<nil>}")
    assert spew_port({"port": 80, "appProtocol": "h2c"}) == (
        "(v1.EndpointPort){Name:(string) Port:(int32)80 Protocol:(v1.Protocol) AppProtocol:(*string)h2c}")
    s = {"notReadyAddresses": [{"ip": "1.2.3.4", "nodeName": "n1",
                                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u"}}],
         "ports": [{"port": 80, "protocol": "TCP"}]}
    assert spew_subset(s) == (
        "(v1.EndpointSubset){Addresses:([]v1.EndpointAddress)<nil> "
        "NotReadyAddresses:([]v1.EndpointAddress)[{IP:(string)1.2.3.4 Hostname:(string) NodeName:(*string)n1 "
        "TargetRef:(*v1.ObjectReference){Kind:(string)Pod Namespace:(string)ns Name:(string)p UID:(types.UID)u "
        "APIVersion:(string) ResourceVersion:(string) FieldPath:(string)}}] "
        "Ports:([]v1.EndpointPort)[{Name:(string) Port:(int32)80 Protocol:(v1.Protocol)TCP "
        "AppProtocol:(*string)<nil>}]}")
    assert spew_subset({"addresses": [{"ip": "1.2.3.4"}], "ports": []}) == (
        "(v1.EndpointSubset){Addresses:([]v1.EndpointAddress)[{IP:(string)1.2.3.4 Hostname:(string) "
        "NodeName:(*string)<nil> TargetRef:(*v1.ObjectReference)<nil>}] NotReadyAddresses:([]v1.EndpointAddress)<nil> "
        "Ports:([]v1.EndpointPort)[]}")


def test_sort_order() -> None:
    """Addresses by IP bytes then UID (none first); ports and subsets by the MD5 of their spew text."""
    ports = [port(p) for p in (80, 443, 8080, 9090)]
    s = sort_subsets([{"addresses": [addr("10.0.0.2"), addr("10.0.0.10"), addr("10.0.0.2", "b"),
                                     addr("10.0.0.2", "a")], "ports": ports}])
    assert [(a["ip"], (a.get("targetRef") or {}).get("uid")) for a in s[0]["addresses"]] == [
        ("10.0.0.10", None), ("10.0.0.2", None), ("10.0.0.2", "a"), ("10.0.0.2", "b")]
    assert s[0]["ports"] == sorted(ports, key=lambda p: hashlib.md5(spew_port(p).encode()).digest())
    many = [subset([addr(f"10.0.{i}.1")], None, [port(80)]) for i in range(6)]
    assert sort_subsets(many) == sorted(many, key=lambda x: hashlib.md5(spew_subset(x).encode()).digest())


@pytest.mark.parametrize(("ready", "not_ready", "want_ready", "want_not_ready"), [
    pytest.param([], [], [], [], id="empty"),
    pytest.param([50, 100, 100, 100, 100], [50, 100, 100, 100, 100], [50, 100, 100, 100, 100],
                 [50, 100, 100, 100, 100], id="total endpoints < max capacity"),
    pytest.param([100, 100, 100, 100, 100], [100, 100, 100, 100, 100], [100, 100, 100, 100, 100],
                 [100, 100, 100, 100, 100], id="total endpoints = max capacity"),
    pytest.param([90, 110, 50, 10, 20], [101, 200, 200, 201, 298], [90, 110, 50, 10, 20], [73, 144, 144, 145, 214],
                 id="total ready endpoints < max capacity, but total endpoints > max capacity"),
    pytest.param([205, 400, 402, 400, 693], [100, 200, 200, 200, 300], [98, 191, 192, 191, 328], [0, 0, 0, 0, 0],
                 id="total ready endpoints > max capacity"),
])
def test_truncate_endpoints(ready: list[int], not_ready: list[int], want_ready: list[int],
                            want_not_ready: list[int]) -> None:
    """TestTruncateEndpoints."""
    subsets = [subset([addr(f"r{i}-{j}") for j in range(r)], [addr(f"n{i}-{j}") for j in range(n)])
               for i, (r, n) in enumerate(zip(ready, not_ready, strict=True))]
    out, truncated = truncate_subsets(subsets)
    assert [len(s["addresses"]) for s in out] == want_ready
    assert [len(s["notReadyAddresses"]) for s in out] == want_not_ready
    assert truncated == (sum(ready) + sum(not_ready) > 1000)


def _es(prefix: str, ns: str, rv1: str, rv2: str, p: int) -> Obj:
    return {"addresses": [{"ip": f"{prefix}.1", "targetRef": {"kind": "Pod", "name": f"pod{prefix}-1", "namespace": ns,
                                                              "resourceVersion": rv1}}],
            "notReadyAddresses": [{"ip": f"{prefix}.2", "targetRef": {"kind": "Pod", "name": f"pod{prefix}-2",
                                                                      "namespace": "ns2", "resourceVersion": rv2}}],
            "ports": [{"port": p, "protocol": "TCP"}]}


def _mutate(s: Obj, fn: Any) -> Obj:
    copy_ = copy.deepcopy(s)
    fn(copy_)
    return copy_


ES1, ES2 = _es("1.1.1", "ns", "1", "2", 8081), _es("2.2.2", "ns", "3", "4", 8082)


@pytest.mark.parametrize(("a", "b", "expected"), [
    pytest.param([ES1, ES2], [ES1], False, id="Subsets removed"),
    pytest.param([ES1, ES2], [_mutate(ES1, lambda s: s["addresses"][0].update(ip="1.1.1.10")), ES2], False,
                 id="Ready Pod IP changed"),
    pytest.param([ES1, ES2], [ES1, _mutate(ES2, lambda s: s["notReadyAddresses"][0].update(ip="2.2.2.10"))], False,
                 id="NotReady Pod IP changed"),
    pytest.param([ES1, ES2], [ES1, _mutate(ES2, lambda s: s["addresses"][0]["targetRef"].update(
        resourceVersion="100"))], True, id="Pod ResourceVersion changed"),
    pytest.param([ES1, ES2], [ES1, _mutate(ES2, lambda s: s["addresses"][0]["targetRef"].pop("resourceVersion"))],
                 True, id="Pod ResourceVersion removed"),
    pytest.param([ES1, ES2], [ES1, _mutate(ES1, lambda s: s["ports"][0].update(port=8082))], False,
                 id="Ports changed"),
    pytest.param(None, [], True, id="nil and empty alike"),
    pytest.param([{"addresses": [{"ip": "1.1.1.1", "nodeName": ""}]}], [{"addresses": [{"ip": "1.1.1.1"}]}], False,
                 id="an empty nodeName is not an absent one"),
])
def test_subsets_equal_ignore_resource_version(a: Any, b: Any, expected: bool) -> None:
    """TestEndpointSubsetsEqualIgnoreResourceVersion."""
    assert subsets_equal_ignoring_resource_version(a, b) is expected
