"""The range allocator's tables (``ipam/range_allocator_test.go``: TestOccupyPreExistingCIDR,
TestAllocateOrOccupyCIDRSuccess/Failure, TestReleaseCIDRSuccess) and the start-up flag checks
(``cmd/kube-controller-manager/app/core_test.go``: TestSetNodeCIDRMaskSizes), through the controller with a
recording client and informer caches filled by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog

from controller_manager.api.resources import NODES, Resource
from controller_manager.client.errors import ApiError, ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.nodeipam import NodeIpamController
from controller_manager.controllers.nodeipam.allocator import AllocationError
from controller_manager.controllers.nodeipam.config import ConfigError, node_cidr_mask_sizes, parse_cluster_cidrs
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory
from tests.runtime.fakes import FakeRecorder


@dataclass
class Recorder:
    """Records patches; ``error`` makes every node patch fail."""

    error: Exception | None = None
    patches: list[tuple[str, Any]] = field(default_factory=list)

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        assert res is NODES
        assert patch_type == "strategic"
        self.patches.append((name, patch))
        if self.error is not None:
            raise self.error
        return {"metadata": {"name": name}}



def node(name: str, *cidrs: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {}
    if cidrs:
        spec = {"podCIDR": cidrs[0], "podCIDRs": list(cidrs)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}


def new_controller(client: Recorder | None = None, **flags: Any) -> tuple[NodeIpamController, Recorder]:
    client = client or Recorder()
    clock = FakeClock()
    options = {"allocate_node_cidrs": True, **flags}
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock),  # type: ignore[arg-type]
                            options=options, logger=structlog.get_logger("test"))
    ctrl = NodeIpamController(ctx)
    if ctrl.enabled:
        ctrl.recorder = FakeRecorder()  # type: ignore[assignment]
    return ctrl, client


def put(ctrl: NodeIpamController, n: dict[str, Any]) -> None:
    ctrl.node_informer.store._put(n["metadata"]["name"], n)


def add(ctrl: NodeIpamController, *nodes: dict[str, Any]) -> None:
    for n in nodes:
        put(ctrl, n)
        ctrl._on_node(Added(n))


def events(ctrl: NodeIpamController) -> list[tuple[str, str, str, str]]:
    recorder = ctrl.recorder
    assert isinstance(recorder, FakeRecorder)
    return recorder.events


async def allocate(ctrl: NodeIpamController, name: str) -> None:
    await ctrl.sync(name)


DUAL_FLAGS = {"cluster_cidr": "10.10.0.0/16,ace:cab:deca::/8", "node_cidr_mask_size_ipv6": 24}


# --- TestOccupyPreExistingCIDR ----------------------------------------------------------------------

@pytest.mark.parametrize(("flags", "nodes", "fails"), [
    ({"cluster_cidr": "10.10.0.0/16", "node_cidr_mask_size": 24}, [node("n0")], False),
    (DUAL_FLAGS, [node("n0")], False),
    ({"cluster_cidr": "10.10.0.0/16", "node_cidr_mask_size": 24}, [node("n0", "10.10.0.1/24")], False),
    (DUAL_FLAGS, [node("n0", "10.10.0.1/24", "ace:cab:deca::1/120")],
     False),
    ({"cluster_cidr": "10.10.0.0/16", "node_cidr_mask_size": 24}, [node("n0", "172.10.0.1/24")], True),
    (DUAL_FLAGS, [node("n0", "10.10.0.1/24", "fd00::/86")], True),
    (DUAL_FLAGS, [node("n0", "172.10.0.1/24", "ace:cab:deca::1/120")],
     True),
    ({"cluster_cidr": "10.10.0.0/16"}, [node("n0", "10.10.0.1/24", "ace:cab:deca::1/120")], True),
])
def test_occupy_pre_existing_cidr(flags: dict[str, Any], nodes: list[dict[str, Any]], fails: bool) -> None:
    ctrl, _ = new_controller(**flags)
    assert ctrl.allocator is not None
    for n in nodes:
        cidrs = n["spec"].get("podCIDRs") or []
        if fails:
            with pytest.raises(AllocationError):
                ctrl.allocator.occupy(n["metadata"]["name"], cidrs)
        else:
            ctrl.allocator.occupy(n["metadata"]["name"], cidrs)


# --- TestAllocateOrOccupyCIDRSuccess ----------------------------------------------------------------

@pytest.mark.parametrize(("flags", "existing", "expected"), [
    ({"cluster_cidr": "127.123.234.0/24", "node_cidr_mask_size": 30}, [], ["127.123.234.0/30"]),
    ({"cluster_cidr": "127.123.234.0/24", "node_cidr_mask_size": 30, "service_cluster_ip_range": "127.123.234.0/26"},
     [], ["127.123.234.64/30"]),
    ({"cluster_cidr": "127.123.234.0/24", "node_cidr_mask_size": 30, "service_cluster_ip_range": "127.123.234.0/26"},
     ["127.123.234.64/30", "127.123.234.68/30", "127.123.234.72/30", "127.123.234.80/30", "127.123.234.84/30"],
     ["127.123.234.76/30"]),
    ({"cluster_cidr": "127.123.234.0/8,ace:cab:deca::/84", "node_cidr_mask_size_ipv4": 30,
      "node_cidr_mask_size_ipv6": 98, "service_cluster_ip_range": "127.123.234.0/26"},
     [], ["127.0.0.0/30", "ace:cab:deca::/98"]),
    ({"cluster_cidr": "ace:cab:deca::/84,127.123.234.0/8", "node_cidr_mask_size_ipv4": 30,
      "node_cidr_mask_size_ipv6": 98, "service_cluster_ip_range": "127.123.234.0/26"},
     [], ["ace:cab:deca::/98", "127.0.0.0/30"]),
    ({"cluster_cidr": "10.10.0.0/22", "node_cidr_mask_size": 24},
     ["10.10.0.0/24", "10.10.1.0/24", "10.10.2.0/24"], ["10.10.3.0/24"]),
    # the secondary service range is kept out too
    ({"cluster_cidr": "10.0.0.0/30,fd00::/126", "node_cidr_mask_size_ipv4": 31, "node_cidr_mask_size_ipv6": 127,
      "service_cluster_ip_range": "10.0.0.0/31,fd00::/127"}, [], ["10.0.0.2/31", "fd00::2/127"]),
])
async def test_allocate_or_occupy_success(flags: dict[str, Any], existing: list[str], expected: list[str]) -> None:
    ctrl, client = new_controller(**flags)
    family_of_first = expected[0].count(":") > 0
    add(ctrl, *[node(f"old-{i}", c) for i, c in enumerate(existing)
                if (c.count(":") > 0) == family_of_first])
    add(ctrl, node("new"))
    await allocate(ctrl, "new")
    assert client.patches == [("new", {"spec": {"podCIDR": expected[0], "podCIDRs": expected}})]
    assert events(ctrl) == []


# --- TestAllocateOrOccupyCIDRFailure ----------------------------------------------------------------

async def test_allocate_failure_records_cidr_not_available() -> None:
    ctrl, client = new_controller(cluster_cidr="127.123.234.0/28", node_cidr_mask_size=30)
    add(ctrl, *[node(f"old-{i}", f"127.123.234.{4 * i}/30") for i in range(4)])
    add(ctrl, node("new"))
    with pytest.raises(AllocationError, match="failed to allocate cidr from cluster cidr at idx:0: CIDR allocation "
                                              "failed; there are no remaining CIDRs left"):
        await allocate(ctrl, "new")
    assert client.patches == []
    assert events(ctrl) == [("new", "Normal", "CIDRNotAvailable", "Node new status is now: CIDRNotAvailable")]


async def test_dual_stack_failure_gives_back_the_first_family() -> None:
    ctrl, _client = new_controller(cluster_cidr="10.0.0.0/16,fd00::/126", node_cidr_mask_size_ipv6=127)
    add(ctrl, node("a"), node("b"), node("c"))
    await allocate(ctrl, "a")
    await allocate(ctrl, "b")
    with pytest.raises(AllocationError, match="idx:1"):
        await allocate(ctrl, "c")
    assert ctrl.allocator is not None
    assert len(ctrl.allocator.sets[0]) == 2  # c's IPv4 CIDR was given back


# --- TestReleaseCIDRSuccess -------------------------------------------------------------------------

@pytest.mark.parametrize(("allocated", "release", "expected"), [
    (["127.123.234.0/30", "127.123.234.4/30", "127.123.234.8/30", "127.123.234.12/30"], "127.123.234.4/30",
     "127.123.234.4/30"),
    (["127.123.234.0/30", "127.123.234.4/30", "127.123.234.8/30", "127.123.234.12/30"], "127.123.234.0/30",
     "127.123.234.0/30"),
])
async def test_release_cidr_success(allocated: list[str], release: str, expected: str) -> None:
    ctrl, client = new_controller(cluster_cidr="127.123.234.0/28", node_cidr_mask_size=30)
    add(ctrl, *[node(f"n{i}", c) for i, c in enumerate(allocated)])
    add(ctrl, node("new"))
    with pytest.raises(AllocationError):
        await allocate(ctrl, "new")
    gone = next(n for n in (node(f"n{i}", c) for i, c in enumerate(allocated)) if n["spec"]["podCIDR"] == release)
    ctrl._on_node(Deleted(gone))
    await allocate(ctrl, "new")
    assert client.patches == [("new", {"spec": {"podCIDR": expected, "podCIDRs": [expected]}})]


async def test_node_being_deleted_releases_its_cidrs() -> None:
    ctrl, client = new_controller(cluster_cidr="10.0.0.0/31", node_cidr_mask_size=32)
    add(ctrl, node("a", "10.0.0.0/32"), node("b", "10.0.0.1/32"))
    assert ctrl.allocator is not None
    assert len(ctrl.allocator.sets[0]) == 2
    put(ctrl, node("a", "10.0.0.0/32", deleting=True))
    await allocate(ctrl, "a")
    assert len(ctrl.allocator.sets[0]) == 1
    assert client.patches == []


@pytest.mark.parametrize(("error", "given_back"), [
    (ServerError(500, "InternalError", "boom"), True),
    (ServerError(504, "ServerTimeout", "slow"), False),
])
async def test_patch_failure_records_cidr_assignment_failed(error: ApiError, given_back: bool) -> None:
    ctrl, client = new_controller(Recorder(error=error), cluster_cidr="10.0.0.0/16")
    add(ctrl, node("a"))
    with pytest.raises(AllocationError, match="failed to patch node CIDR"):
        await allocate(ctrl, "a")
    assert len(client.patches) == 3  # cidrUpdateRetries
    assert ctrl.allocator is not None
    assert len(ctrl.allocator.sets[0]) == (0 if given_back else 1)
    assert events(ctrl) == [("a", "Normal", "CIDRAssignmentFailed", "Node a status is now: CIDRAssignmentFailed")]


async def test_node_that_got_cidrs_meanwhile_keeps_them() -> None:
    ctrl, client = new_controller(cluster_cidr="10.0.0.0/16")
    add(ctrl, node("a"))
    assert ctrl.allocator is not None
    reserved = ctrl.allocator.reserve()
    put(ctrl, node("a", "10.0.5.0/24"))
    await ctrl._update_allocation("a", reserved)
    assert client.patches == []
    assert len(ctrl.allocator.sets[0]) == 0  # the reserved one was given back


def test_disabled_does_nothing() -> None:
    ctrl, _ = new_controller(allocate_node_cidrs=False, cluster_cidr="")
    assert ctrl.workers() == 0
    assert ctrl.allocator is None


# --- start-up checks ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("flags", "message"), [
    ({"cluster_cidr": ""}, "Must specify --cluster-cidr if --allocate-node-cidrs is set"),
    ({"cluster_cidr": "10.0.0.0/16", "node_cidr_mask_size": 8}, "mask size of cluster CIDR must be less than"),
    ({"cluster_cidr": "10.0.0.0/16,10.1.0.0/16"}, "not configured as dual stack"),
    ({"cluster_cidr": "10.0.0.0/16,fd00::/48,10.1.0.0/16"}, "> more than max allowed of 2"),
    ({"cluster_cidr": "10.0.0.0"}, 'failed to parse cidr value:"10.0.0.0"'),
    ({"cluster_cidr": "fd00::/32"}, "the node CIDR size is too big"),  # /64 nodes: 32 bits apart
    ({"cluster_cidr": "10.0.0.0/16", "service_cluster_ip_range": "10.96.0.0/12,10.112.0.0/12"},
     "not dualstack"),
    ({"cluster_cidr": "10.0.0.0/16", "cidr_allocator_type": "CloudAllocator"}, "invalid CIDR allocator type"),
])
def test_startup_errors(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        new_controller(**flags)


V4 = parse_cluster_cidrs("10.0.0.0/16")
V6 = parse_cluster_cidrs("fd00::/48")
DUAL = parse_cluster_cidrs("10.0.0.0/16,fd00::/48")
DUAL_V6_FIRST = parse_cluster_cidrs("fd00::/48,10.0.0.0/16")


@pytest.mark.parametrize(("cidrs", "mask", "v4", "v6", "expected", "error"), [
    (V4, 0, 0, 0, (24,), None),
    (V6, 0, 0, 0, (64,), None),
    (V4, 22, 0, 0, (22,), None),
    (V6, 22, 0, 0, (22,), None),
    (V4, 22, 25, 0, None, "not allowed if --node-cidr-mask-size is set"),
    (V4, 0, 25, 0, (25,), None),
    (V4, 0, 0, 65, None, "not allowed for a single-stack IPv4 cluster"),
    (V6, 0, 25, 0, None, "not allowed for a single-stack IPv6 cluster"),
    (V6, 0, 0, 65, (65,), None),
    (DUAL, 0, 0, 0, (24, 64), None),
    (DUAL, 0, 30, 0, (30, 64), None),
    (DUAL, 0, 30, 98, (30, 98), None),
    (DUAL_V6_FIRST, 0, 30, 98, (98, 30), None),
    (DUAL, 24, 0, 0, None, "not allowed with dual-stack clusters"),
])
def test_node_cidr_mask_sizes(cidrs: Any, mask: int, v4: int, v6: int, expected: tuple[int, ...] | None,
                              error: str | None) -> None:
    if error is not None:
        with pytest.raises(ConfigError, match=error):
            node_cidr_mask_sizes(cidrs, mask, v4, v6)
    else:
        assert node_cidr_mask_sizes(cidrs, mask, v4, v6) == expected
