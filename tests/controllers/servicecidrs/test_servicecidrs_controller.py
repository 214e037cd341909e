"""Upstream's tables (``pkg/controller/servicecidrs/servicecidrs_controller_test.go``): TestControllerSync (the
requests one sync makes, against a recording client), TestController_canDeleteCIDR, TestController_ipToCidrs and
TestController_cidrToCidrs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import Resource
from controller_manager.clock import FakeClock
from controller_manager.controllers.servicecidrs.controller import (
    DELETION_GRACE_PERIOD,
    MESSAGE_READY,
    MESSAGE_TERMINATING,
    SERVICE_CIDR_PROTECTION_FINALIZER,
    ServiceCIDRsController,
    can_delete_cidr,
    containing_service_cidrs,
    overlapping_service_cidrs,
)
from controller_manager.runtime.controller import ControllerContext, Result
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory

Obj = dict[str, Any]
DEFAULT = "kubernetes"


@dataclass
class RecordingClient:
    """Records (verb, subresource, body) of every write; answers nothing else (the sync reads caches only)."""

    actions: list[tuple[str, str, Any]] = field(default_factory=list)

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> Obj:
        self.actions.append(("patch", subresource or "", patch))
        return {}

    async def apply(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None, *,
                    field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        assert (field_manager, force) == ("service-cidr-controller", True)
        self.actions.append(("patch", subresource or "", obj))
        return {}


def make_service_cidr(name: str, primary: str, secondary: str = "") -> Obj:
    cidrs = [primary] + ([secondary] if secondary else [])
    return {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": name},
            "spec": {"cidrs": cidrs}}


def make_ip_address(name: str) -> Obj:
    family = "IPv6" if ":" in name else "IPv4"
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": name, "labels": {"ipaddress.kubernetes.io/ip-family": family,
                                                  "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}}}


def new_controller(client: RecordingClient, clock: FakeClock) -> ServiceCIDRsController:
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    events = EventBroadcaster(client, clock)  # type: ignore[arg-type]
    return ServiceCIDRsController(ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                                                    events=events))


CLOCK_START = 1_700_000_000.0


def deleting(name: str, seconds_ago: float) -> Obj:
    cidr = make_service_cidr(name, "192.168.0.0/24", "2001:db2::/64")
    cidr["metadata"]["finalizers"] = [SERVICE_CIDR_PROTECTION_FINALIZER]
    cidr["metadata"]["deletionTimestamp"] = format_time(CLOCK_START - seconds_ago)
    return cidr


DELETING = deleting("deleting-cidr", 0)  # just being deleted
DELETED = deleting("deleted-cidr", DELETION_GRACE_PERIOD + 1)  # deleted longer than the grace period
PATCH, STATUS = ("patch", ""), ("patch", "status")

SYNC_CASES: list[tuple[str, list[Obj], list[Obj], str | None, list[tuple[str, str]]]] = [
    ("no existing service CIDRs", [], [], None, []),
    ("default service CIDR must have finalizer", [make_service_cidr(DEFAULT, "192.168.0.0/24", "2001:db2::/64")], [],
     DEFAULT, [PATCH, STATUS]),
    ("service CIDR must have finalizer", [make_service_cidr("no-finalizer", "192.168.0.0/24", "2001:db2::/64")], [],
     "no-finalizer", [PATCH, STATUS]),
    ("service CIDR being deleted must remove the finalizer", [DELETED], [], "deleted-cidr", [PATCH]),
    ("service CIDR being deleted but within the grace period must be requeued not remove the finalizer",
     [DELETING], [], "deleting-cidr", []),
    ("service CIDR being deleted with IPv4 addresses should update the status", [DELETED],
     [make_ip_address("192.168.0.1")], "deleted-cidr", [STATUS]),
    ("service CIDR being deleted and overlapping same range and IPv4 addresses should remove the finalizer",
     [DELETED, make_service_cidr("overlapping", "192.168.0.0/24", "2001:db2::/64")],
     [make_ip_address("192.168.0.1")], "deleted-cidr", [PATCH]),
    ("service CIDR being deleted and overlapping and IPv4 addresses should remove the finalizer",
     [DELETED, make_service_cidr("overlapping", "192.168.0.0/16", "2001:db2::/64")],
     [make_ip_address("192.168.0.1")], "deleted-cidr", [PATCH]),
    ("service CIDR being deleted and not overlapping and IPv4 addresses should update the status",
     [DELETED, make_service_cidr("overlapping", "192.168.255.0/26", "2001:db2::/64")],
     [make_ip_address("192.168.0.1")], "deleted-cidr", [STATUS]),
    ("service CIDR being deleted with IPv6 addresses should update the status", [DELETED],
     [make_ip_address("2001:db2::1")], "deleted-cidr", [STATUS]),
    ("service CIDR being deleted and overlapping same range and IPv6 addresses should remove the finalizer",
     [DELETED, make_service_cidr("overlapping", "192.168.0.0/24", "2001:db2::/64")],
     [make_ip_address("2001:db2::1")], "deleted-cidr", [PATCH]),
    ("service CIDR being deleted and overlapping and IPv6 addresses should remove the finalizer",
     [DELETED, make_service_cidr("overlapping", "192.168.0.0/16", "2001:db2::/48")],
     [make_ip_address("2001:db2::1")], "deleted-cidr", [PATCH]),
    ("service CIDR being deleted and not overlapping and IPv6 addresses should update the status",
     [DELETED, make_service_cidr("overlapping", "192.168.255.0/26", "2001:db2:a:b::/64")],
     [make_ip_address("2001:db2::1")], "deleted-cidr", [STATUS]),
]


@pytest.mark.parametrize(("cidrs", "ips", "synced", "actions"), [c[1:] for c in SYNC_CASES],
                         ids=[c[0] for c in SYNC_CASES])
def test_controller_sync(cidrs: list[Obj], ips: list[Obj], synced: str | None,
                         actions: list[tuple[str, str]]) -> None:
    client = RecordingClient()
    controller = new_controller(client, FakeClock(CLOCK_START))
    target = next((c for c in cidrs if c["metadata"]["name"] == synced), None)
    result = None
    if target is not None:
        result = asyncio.run(controller.sync_service_cidr(target, cidrs, ips))
    assert [(verb, sub) for verb, sub, _ in client.actions] == actions
    if target is DELETING:
        # Requeued for when the grace period is over.
        assert result == Result(requeue_after=DELETION_GRACE_PERIOD)


def test_sync_writes_upstreams_patches_and_conditions() -> None:
    client = RecordingClient()
    controller = new_controller(client, FakeClock(CLOCK_START))
    cidr = make_service_cidr(DEFAULT, "10.96.0.0/12")
    asyncio.run(controller.sync_service_cidr(cidr, [cidr], []))
    (_, _, finalizer), (_, _, status) = client.actions
    assert finalizer == {"metadata": {"finalizers": [SERVICE_CIDR_PROTECTION_FINALIZER]}}
    assert status == {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": DEFAULT},
                      "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
                                                 "message": MESSAGE_READY,
                                                 "lastTransitionTime": format_time(CLOCK_START)}]}}

    # Already ready and finalized: nothing to write.
    client.actions.clear()
    cidr["metadata"]["finalizers"] = [SERVICE_CIDR_PROTECTION_FINALIZER]
    cidr["status"] = status["status"]
    asyncio.run(controller.sync_service_cidr(cidr, [cidr], []))
    assert client.actions == []

    # Deleted while an address it alone holds is allocated: Ready=False, Terminating.
    cidr["metadata"]["deletionTimestamp"] = format_time(CLOCK_START - 60)
    asyncio.run(controller.sync_service_cidr(cidr, [cidr], [make_ip_address("10.96.0.10")]))
    [(_, sub, terminating)] = client.actions
    assert sub == "status"
    [condition] = terminating["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Terminating",
                                                                                 MESSAGE_TERMINATING)
    # The address released: the finalizer goes.
    client.actions.clear()
    cidr["status"] = terminating["status"]
    asyncio.run(controller.sync_service_cidr(cidr, [cidr], []))
    [(_, sub, removal)] = client.actions
    assert (sub, removal) == ("", {"metadata": {"$deleteFromPrimitiveList/finalizers":
                                                [SERVICE_CIDR_PROTECTION_FINALIZER]}})


def cidr(name: str, primary: str, secondary: str = "") -> Obj:
    return make_service_cidr(name, primary, secondary)


KUBERNETES = cidr(DEFAULT, "192.168.0.0/24", "2001:db2::/64")

CAN_DELETE_CASES: list[tuple[str, list[Obj], list[Obj], bool]] = [
    ("empty", [], [], True),
    ("CIDR and no IPs", [KUBERNETES], [], True),
    ("CIDR with IPs", [KUBERNETES], [make_ip_address("192.168.0.24")], False),
    ("CIDR without IPs", [KUBERNETES], [make_ip_address("192.168.1.24")], True),
    ("CIDR with IPv4 address referencing the subnet address", [KUBERNETES], [make_ip_address("192.168.0.0")], True),
    ("CIDR with IPv4 address referencing the broadcast address", [KUBERNETES], [make_ip_address("192.168.0.255")],
     True),
    ("CIDR with IPv6 address referencing the broadcast address", [KUBERNETES],
     [make_ip_address("2001:0db2::ffff:ffff:ffff:ffff")], False),
    ("CIDR with same range overlapping and IPs", [KUBERNETES, cidr("overlapping", "192.168.0.0/24", "2001:db2::/64")],
     [make_ip_address("192.168.0.23")], True),
    ("CIDR with smaller range overlapping and IPs",
     [KUBERNETES, cidr("overlapping", "192.168.0.0/26", "2001:db2::/64")], [make_ip_address("192.168.0.23")], True),
    ("CIDR with smaller range overlapping but IPs orphan",
     [KUBERNETES, cidr("overlapping", "192.168.0.0/28", "2001:db2::/64")], [make_ip_address("192.168.0.23")], False),
    ("CIDR with larger range overlapping and IPs",
     [KUBERNETES, cidr("overlapping", "192.168.0.0/16", "2001:db2::/64")], [make_ip_address("192.168.0.23")], True),
]


@pytest.mark.parametrize(("cidrs", "ips", "want"), [c[1:] for c in CAN_DELETE_CASES],
                         ids=[c[0] for c in CAN_DELETE_CASES])
def test_can_delete_cidr(cidrs: list[Obj], ips: list[Obj], want: bool) -> None:
    assert can_delete_cidr(KUBERNETES, cidrs, ips) is want


UNRELATED = [cidr("unrelated", "10.0.0.0/24"), cidr("unrelated2", "10.0.0.0/16")]
TWO_EQUAL = [KUBERNETES, cidr("overlapping", "192.168.0.0/24", "2001:db2::/96"), *UNRELATED]
THREE = [KUBERNETES, cidr("overlapping", "192.168.0.0/24", "2001:db2::/64"),
         cidr("overlapping2", "192.168.0.0/26", "2001:db2::/96"), *UNRELATED]

IP_TO_CIDRS_CASES: list[tuple[str, list[Obj], str, list[str]]] = [
    ("empty", [], "192.168.0.23", []),
    ("one CIDR", [KUBERNETES, *UNRELATED], "192.168.0.23", [DEFAULT]),
    ("two equal CIDR", TWO_EQUAL, "192.168.0.23", [DEFAULT, "overlapping"]),
    ("three CIDR - two same and one larger", THREE, "192.168.0.23", [DEFAULT, "overlapping", "overlapping2"]),
    ("three CIDR - two same and one larger - IPv4 subnet address", THREE, "192.168.0.0", []),
    ("three CIDR - two same and one larger - IPv4 broadcast address", THREE, "192.168.0.63",
     [DEFAULT, "overlapping"]),
    ("three CIDR - two same and one larger - IPv6 subnet address", THREE, "2001:db2::", []),
    ("three CIDR - two same and one larger - IPv6 broadcast address", THREE, "2001:0db2::ffff:ffff:ffff:ffff",
     [DEFAULT, "overlapping"]),
]


@pytest.mark.parametrize(("cidrs", "ip", "want"), [c[1:] for c in IP_TO_CIDRS_CASES],
                         ids=[c[0] for c in IP_TO_CIDRS_CASES])
def test_ip_to_cidrs(cidrs: list[Obj], ip: str, want: list[str]) -> None:
    assert sorted(containing_service_cidrs(make_ip_address(ip), cidrs)) == sorted(want)


def test_ip_to_cidrs_only_counts_addresses_of_the_api_servers_allocator() -> None:
    ip = make_ip_address("192.168.0.23")
    ip["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"] = "someone-else"
    assert containing_service_cidrs(ip, [KUBERNETES]) == []


CIDR_TO_CIDRS_CASES: list[tuple[str, list[Obj], list[str]]] = [
    ("empty", [], []),
    ("one CIDR", [KUBERNETES, *UNRELATED], [DEFAULT]),
    ("two equal CIDR", TWO_EQUAL, [DEFAULT, "overlapping"]),
    ("three CIDR - two same and one larger", THREE, [DEFAULT, "overlapping", "overlapping2"]),
]


@pytest.mark.parametrize(("cidrs", "want"), [c[1:] for c in CIDR_TO_CIDRS_CASES],
                         ids=[c[0] for c in CIDR_TO_CIDRS_CASES])
def test_cidr_to_cidrs(cidrs: list[Obj], want: list[str]) -> None:
    assert sorted(overlapping_service_cidrs(KUBERNETES, cidrs)) == sorted(want)
