"""The CIDR set's tables (``ipam/cidrset/cidr_set_test.go``) and a property: allocations never overlap."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.controllers.nodeipam.cidrset import (
    ERR_NO_CIDRS_REMAINING,
    ERR_SUBNET_TOO_BIG,
    CIDRSet,
    CIDRSetError,
    Network,
    parse_cidr,
)
from tests.prometheus import sample_value


def new_set(cluster: str, node_mask: int) -> CIDRSet:
    return CIDRSet(parse_cidr(cluster), node_mask)


@pytest.mark.parametrize(("cluster", "mask", "expected"), [
    ("127.123.234.0/30", 30, "127.123.234.0/30"),
    ("beef:1234::/30", 30, "beef:1234::/30"),
])
def test_fully_allocated(cluster: str, mask: int, expected: str) -> None:
    s = new_set(cluster, mask)
    assert str(s.allocate_next()) == expected
    with pytest.raises(CIDRSetError, match=ERR_NO_CIDRS_REMAINING):
        s.allocate_next()
    s.release(parse_cidr(expected))
    assert str(s.allocate_next()) == expected
    with pytest.raises(CIDRSetError):
        s.allocate_next()


@pytest.mark.parametrize(("cluster", "mask", "index", "expected"), [
    ("127.123.3.0/16", 24, 0, "127.123.0.0/24"),
    ("127.123.0.0/16", 24, 15, "127.123.15.0/24"),
    ("127.123.0.0/16", 24, 255, "127.123.255.0/24"),
    ("127.0.0.0/8", 30, 1, "127.0.0.4/30"),
    ("2001:0db8:1234::/48", 64, 0, "2001:db8:1234::/64"),
    ("2001:0db8:1234::/48", 64, 65535, "2001:db8:1234:ffff::/64"),
    ("2001:0db8:1234:3456::/64", 80, 65535, "2001:db8:1234:3456:ffff::/80"),
    ("2001:0db8:1234::/48", 64, 255, "2001:db8:1234:ff::/64"),
    ("2001:0db8:85a3::/48", 64, 4096, "2001:db8:85a3:1000::/64"),
])
def test_index_to_cidr_block(cluster: str, mask: int, index: int, expected: str) -> None:
    assert str(new_set(cluster, mask).index_to_cidr(index)) == expected


@pytest.mark.parametrize(("cluster", "mask"), [("127.123.234.0/16", 24), ("beef:1234::/16", 24)])
def test_randomish_allocation(cluster: str, mask: int) -> None:
    s = new_set(cluster, mask)
    # two rounds: all 256, then none left; release all, all again
    for _ in range(2):
        cidrs = [s.allocate_next() for _ in range(256)]
        with pytest.raises(CIDRSetError):
            s.allocate_next()
        assert len({str(c) for c in cidrs}) == 256
        for c in cidrs:
            s.release(c)
        assert len(s) == 0


@pytest.mark.parametrize(("cluster", "mask", "occupied", "free"), [
    ("127.123.234.0/16", 24, "127.123.234.0/24", 255),
    ("beef:1234::/16", 24, "beef:1234::/24", 255),
    ("127.123.234.0/16", 24, "127.123.0.0/18", 192),
])
def test_allocation_occupied(cluster: str, mask: int, occupied: str, free: int) -> None:
    s = new_set(cluster, mask)
    taken = parse_cidr(occupied)
    s.occupy(taken)
    cidrs = [s.allocate_next() for _ in range(free)]
    with pytest.raises(CIDRSetError):
        s.allocate_next()
    assert all(not c.overlaps(taken) for c in cidrs)  # type: ignore[arg-type]
    assert len({str(c) for c in cidrs}) == free


@pytest.mark.parametrize(("cluster", "mask", "ip", "expected"), [
    ("127.0.0.0/8", 16, "127.0.0.0", 0),
    ("127.0.0.0/8", 16, "127.123.0.0", 123),
    ("127.0.0.0/8", 16, "127.168.0.0", 168),
    ("127.0.0.0/8", 16, "127.224.0.0", 224),
    ("192.168.0.0/16", 24, "192.168.12.0", 12),
    ("192.168.0.0/16", 24, "192.168.151.0", 151),
    ("be00::/8", 16, "be00::", 0),
    ("be00::/8", 16, "be12::", 0x12),
    ("be00::/8", 16, "beff::", 0xff),
    ("2001:db8::/32", 48, "2001:db8:ff::", 0xff),
])
def test_index_for_ip(cluster: str, mask: int, ip: str, expected: int) -> None:
    assert new_set(cluster, mask).index_for_ip(int(ipaddress.ip_address(ip))) == expected


@pytest.mark.parametrize(("cluster", "mask", "ip"), [
    ("192.168.0.0/16", 24, "127.0.0.0"),
    ("be00::/8", 16, "bf00::"),
])
def test_index_for_ip_out_of_range(cluster: str, mask: int, ip: str) -> None:
    with pytest.raises(CIDRSetError, match="is out of the range of CIDR allocator"):
        new_set(cluster, mask).index_for_ip(int(ipaddress.ip_address(ip)))


def assert_used_exactly(s: CIDRSet, begin: int, end: int) -> None:
    """Subnets ``begin``..``end`` are taken and no other. Every index is looked at up to 2**16 subnets; a /8 cut
    into /32s has 2**24 (15 s of is_used calls), so there the taken range, its neighbours and the count (each
    subnet taken is counted once) are what show it."""
    if s.max_cidrs <= 1 << 16:
        assert [i for i in range(s.max_cidrs) if s.is_used(i)] == list(range(begin, end + 1))
        return
    assert all(s.is_used(i) for i in range(begin, end + 1))
    assert not any(s.is_used(i) for i in (begin - 1, end + 1) if 0 <= i < s.max_cidrs)
    assert len(s) == end - begin + 1


@pytest.mark.parametrize(("cluster", "mask", "occupied", "begin", "end"), [
    ("127.0.0.0/8", 16, "127.0.0.0/8", 0, 255),
    ("127.0.0.0/8", 16, "127.0.0.0/2", 0, 255),
    ("127.0.0.0/8", 16, "127.0.0.0/16", 0, 0),
    ("127.0.0.0/8", 32, "127.0.0.0/16", 0, 65535),
    ("127.0.0.0/7", 16, "127.0.0.0/15", 256, 257),
    ("127.0.0.0/7", 15, "127.0.0.0/15", 128, 128),
    ("127.0.0.0/7", 18, "127.0.0.0/15", 1024, 1031),
    ("2001:beef:1200::/40", 48, "2001:beef:1200::/40", 0, 255),
    ("2001:beef:1200::/40", 48, "2001:beef:1200::/48", 0, 0),
    ("2001:beef:1200::/40", 48, "2001:beef:1234::/34", 0, 255),
    ("2001:beef:1234::/48", 52, "2001:beef:1234:0000::/52", 0, 0),
    ("2001:beef:1234::/48", 52, "2001:beef:1234:f000::/52", 15, 15),
    ("2001:beef:1234::/48", 60, "2001:beef:1234:0000::/52", 0, 255),
])
def test_occupy(cluster: str, mask: int, occupied: str, begin: int, end: int) -> None:
    s = new_set(cluster, mask)
    s.occupy(parse_cidr(occupied))
    assert len(s) == end - begin + 1
    assert_used_exactly(s, begin, end)
    # occupying twice counts once; releasing frees the same range
    s.occupy(parse_cidr(occupied))
    assert len(s) == end - begin + 1
    s.release(parse_cidr(occupied))
    assert len(s) == 0


@pytest.mark.parametrize(("cluster", "mask", "other"), [
    ("127.0.0.0/8", 16, "128.0.0.0/16"),
    ("2001:beef:1200::/40", 48, "2001:beef:1300::/48"),
    ("127.0.0.0/8", 16, "::/0"),
])
def test_occupy_out_of_range(cluster: str, mask: int, other: str) -> None:
    with pytest.raises(CIDRSetError, match="is out the range of cluster cidr"):
        new_set(cluster, mask).occupy(parse_cidr(other))


def test_nil_cidr() -> None:
    with pytest.raises(CIDRSetError, match="cidr is nil"):
        new_set("10.0.0.0/8", 16).release(None)


@pytest.mark.parametrize(("cluster", "mask", "error"), [
    ("beef:1234::/32", 49, ERR_SUBNET_TOO_BIG),
    ("beef:1234::/32", 48, None),
    ("127.0.0.0/8", 30, None),  # IPv4 has no such limit
])
def test_subnet_too_big(cluster: str, mask: int, error: str | None) -> None:
    if error is None:
        new_set(cluster, mask)
    else:
        with pytest.raises(CIDRSetError, match=error):
            new_set(cluster, mask)


def test_allocation_wraps_after_the_last_one_handed_out() -> None:
    s = new_set("10.0.0.0/28", 30)
    first, second = s.allocate_next(), s.allocate_next()
    s.release(first)
    # the freed first one is reused only after the rest of the range
    assert [str(s.allocate_next()) for _ in range(3)] == ["10.0.0.8/30", "10.0.0.12/30", "10.0.0.0/30"]
    assert str(second) == "10.0.0.4/30"


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[str, int, list[tuple[str, int]]]:
    v6 = draw(st.booleans())
    bits = 128 if v6 else 32
    cluster_mask = draw(st.integers(bits - 12, bits - 2))
    node_mask = draw(st.integers(cluster_mask, min(bits, cluster_mask + 6)))
    base = "fd00:1234::" if v6 else "10.96.0.0"
    ops = draw(st.lists(st.tuples(st.sampled_from(["alloc", "release", "occupy"]), st.integers(0, 10**6)),
                        max_size=80))
    return f"{base}/{cluster_mask}", node_mask, ops


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_allocations_never_overlap(scenario: tuple[str, int, list[tuple[str, int]]]) -> None:
    cluster_text, node_mask, ops = scenario
    cluster = parse_cidr(cluster_text)
    s = CIDRSet(cluster, node_mask)
    held: list[Network] = []  # CIDRs handed out and not given back (or occupied)
    for op, n in ops:
        if op == "alloc":
            try:
                cidr = s.allocate_next()
            except CIDRSetError:
                assert len(s) == s.max_cidrs
                continue
            assert cidr.prefixlen == node_mask
            assert cidr.subnet_of(cluster)
            assert all(not cidr.overlaps(h) for h in held)  # type: ignore[arg-type]
            held.append(cidr)
        elif op == "release" and held:
            s.release(held.pop(n % len(held)))
        elif op == "occupy":
            cidr = s.index_to_cidr(n % s.max_cidrs)
            if all(not cidr.overlaps(h) for h in held):  # type: ignore[arg-type]
                s.occupy(cidr)
                held.append(cidr)
        assert len(s) == len(held)


def sample(name: str, label: str) -> float:

    value = sample_value(name, {"clusterCIDR": label})
    return 0.0 if value is None else value


def test_metrics() -> None:
    label = "10.77.0.0/22"  # a cluster CIDR no other test uses: the registry is process-wide
    s = new_set(label, 24)
    assert sample("node_ipam_controller_cirdset_max_cidrs", label) == 4
    s.occupy(parse_cidr("10.77.0.0/24"))
    assert str(s.allocate_next()) == "10.77.1.0/24"  # one taken subnet skipped
    assert sample("node_ipam_controller_cidrset_cidrs_allocations_total", label) == 2
    assert sample("node_ipam_controller_cidrset_allocation_tries_per_request_sum", label) == 1
    assert sample("node_ipam_controller_cidrset_allocation_tries_per_request_count", label) == 1
    assert sample("node_ipam_controller_cidrset_usage_cidrs", label) == 0.5
    s.release(parse_cidr("10.77.0.0/23"))
    assert sample("node_ipam_controller_cidrset_cidrs_releases_total", label) == 2
    assert sample("node_ipam_controller_cidrset_usage_cidrs", label) == 0
