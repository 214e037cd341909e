"""Which ServiceCIDRs contain or overlap a prefix or hold an address (upstream's ``pkg/api/servicecidr``).

Guarantees:
- Prefixes are read as Go's ``netip.ParsePrefix`` reads them, host bits allowed (they are masked); a CIDR that
  does not parse matches nothing. Prefixes of different families never overlap.
- :func:`prefix_contains_ip` leaves out the network address, and for IPv4 the broadcast address: a ServiceCIDR
  never hands those out, so a Service holding one cannot belong to it. An IPv4-mapped IPv6 address is IPv6.
- Results keep the order of the ServiceCIDRs given; a ServiceCIDR is listed once per CIDR of it that matches, as
  upstream's helpers list it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

Obj = Mapping[str, Any]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_prefix(text: Any) -> Network | None:
    try:
        return ipaddress.ip_network(str(text), strict=False)
    except ValueError:
        return None


def parse_addr(text: Any) -> Address | None:
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        return None


def cidrs_of(service_cidr: Obj) -> list[str]:
    spec = service_cidr.get("spec")
    cidrs = spec.get("cidrs") if isinstance(spec, Mapping) else None
    return [str(c) for c in cidrs] if isinstance(cidrs, list) else []


def _prefixes(service_cidrs: Iterable[Obj]) -> Iterable[tuple[Obj, Network]]:
    for service_cidr in service_cidrs:
        for text in cidrs_of(service_cidr):
            prefix = parse_prefix(text)
            if prefix is not None:
                yield service_cidr, prefix


def _overlaps(a: Network, b: Network) -> bool:
    return a.version == b.version and a.overlaps(b)


def overlaps_prefix(service_cidrs: Iterable[Obj], prefix: Network) -> list[Obj]:
    """``OverlapsPrefix``: the ServiceCIDRs with a CIDR overlapping ``prefix``."""
    return [sc for sc, p in _prefixes(service_cidrs) if _overlaps(p, prefix)]


def contains_prefix(service_cidrs: Iterable[Obj], prefix: Network) -> list[Obj]:
    """``ContainsPrefix``: the ServiceCIDRs with a CIDR containing ``prefix`` (equal or larger)."""
    return [sc for sc, p in _prefixes(service_cidrs) if _overlaps(p, prefix) and p.prefixlen <= prefix.prefixlen]


def prefix_contains_ip(prefix: Network, ip: Address) -> bool:
    """``PrefixContainsIP``: in the prefix, not its network address, nor (IPv4) its broadcast address."""
    if ip.version != prefix.version:
        return False
    if ip == prefix.network_address:
        return False
    if ip.version == 4 and ip == prefix.broadcast_address:
        return False
    return ip in prefix


def contains_address(service_cidrs: Iterable[Obj], ip: Address) -> list[Obj]:
    """``ContainsAddress``: the ServiceCIDRs with a CIDR that could have handed out ``ip``."""
    return [sc for sc, p in _prefixes(service_cidrs) if prefix_contains_ip(p, ip)]
