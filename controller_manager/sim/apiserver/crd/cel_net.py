"""Kubernetes' CEL IP and CIDR libraries (``k8s.io/apiserver/pkg/cel/library`` ip.go and cidr.go) at run time.

Parsing is Go's ``netip`` as Kubernetes restricts it: no zone (``%eth0``), no IPv4-mapped IPv6 address, no leading
zeros in an IPv4 address; a CIDR needs its prefix length and keeps the address as written (``cidr('10.0.0.1/8')
.ip()`` is ``10.0.0.1``, ``.masked()`` is ``10.0.0.0/8``). Errors are the library's (``IP Address "x" parse error
during conversion from string: ...``). :data:`FUNCTIONS` holds the functions and methods by CEL name (``ip`` is both
the conversion and a CIDR's method).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celpy import celtypes

__all__ = ["CIDR", "FUNCTIONS", "IP"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Interface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


@dataclass(frozen=True)
class IP:
    """A ``net.IP`` value."""

    address: Address

    def __str__(self) -> str:
        return str(self.address)


@dataclass(frozen=True)
class CIDR:
    """A ``net.CIDR`` value: an address (as written) and a prefix length."""

    interface: Interface

    def __str__(self) -> str:
        return f"{self.interface.ip}/{self.interface.network.prefixlen}"


class NetError(ValueError):
    """An argument the library refuses (its message is the library's)."""


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return str(value)


def _address(raw: str) -> Address:
    if "%" in raw:
        raise NetError("IP address with zone value is not allowed")
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        raise NetError(f'IP Address "{raw}" parse error during conversion from string: ParseAddr("{raw}"): '
                       "unable to parse IP") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise NetError("IPv4-mapped IPv6 address is not allowed")
    return address


def _interface(raw: str) -> Interface:
    if "%" in raw:
        raise NetError("CIDR with zone value is not allowed")
    address, slash, bits = raw.partition("/")
    where = f'network address parse error during conversion from string: netip.ParsePrefix("{raw}")'
    if not slash:
        raise NetError(f"{where}: no '/'")
    if not bits.isdigit() or (len(bits) > 1 and bits.startswith("0")):
        raise NetError(f'{where}: bad bits after slash: "{bits}"')
    try:
        parsed = _address(address)
        interface = ipaddress.ip_interface(f"{parsed}/{int(bits)}")
    except (NetError, ValueError):
        raise NetError(f"{where}: invalid prefix") from None
    return interface


def _valid(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        try:
            parse(_text(value))
        except NetError:
            return celtypes.BoolType(False)
        return celtypes.BoolType(True)

    return check


def _ip(value: Any) -> IP:
    """``ip(<string>)``, or a CIDR's ``ip()`` (its address)."""
    if isinstance(value, CIDR):
        return IP(value.interface.ip)
    return IP(_address(_text(value)))


def _is_canonical(value: Any) -> Any:
    raw = _text(value)
    return celtypes.BoolType(str(_address(raw)) == raw)


def _ip_of(value: Any) -> Address:
    if not isinstance(value, IP):
        raise TypeError("no such overload")
    return value.address


def _cidr_of(value: Any) -> Interface:
    if not isinstance(value, CIDR):
        raise TypeError("no such overload")
    return value.interface


def _link_local_multicast(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    return (int(address) >> 112) & 0xFF0F == 0xFF02


def _global_unicast(address: Address) -> bool:
    """Go's IsGlobalUnicast: anything but unspecified, loopback, multicast, link-local unicast and the IPv4
    broadcast address (private addresses included)."""
    if isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (address.is_unspecified or address.is_loopback or address.is_multicast or address.is_link_local)


def _contains_ip(cidr: Any, other: Any) -> Any:
    network = _cidr_of(cidr).network
    address = _ip_of(other) if isinstance(other, IP) else _address(_text(other))
    return celtypes.BoolType(address.version == network.version and address in network)


def _contains_cidr(cidr: Any, other: Any) -> Any:
    network = _cidr_of(cidr).network
    inner = (_cidr_of(other) if isinstance(other, CIDR) else _interface(_text(other))).network
    return celtypes.BoolType(inner.version == network.version and inner.subnet_of(network))  # type: ignore[arg-type]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isIP": _valid(_address), "ip": _ip, "ip.isCanonical": _is_canonical,
    "family": lambda ip: celtypes.IntType(_ip_of(ip).version),
    "isUnspecified": lambda ip: celtypes.BoolType(_ip_of(ip).is_unspecified),
    "isLoopback": lambda ip: celtypes.BoolType(_ip_of(ip).is_loopback),
    "isLinkLocalMulticast": lambda ip: celtypes.BoolType(_link_local_multicast(_ip_of(ip))),
    "isLinkLocalUnicast": lambda ip: celtypes.BoolType(_ip_of(ip).is_link_local),
    "isGlobalUnicast": lambda ip: celtypes.BoolType(_global_unicast(_ip_of(ip))),
    "isCIDR": _valid(_interface), "cidr": lambda text: CIDR(_interface(_text(text))),
    "containsIP": _contains_ip, "containsCIDR": _contains_cidr,
    "masked": lambda cidr: CIDR(ipaddress.ip_interface(str(_cidr_of(cidr).network))),
    "prefixLength": lambda cidr: celtypes.IntType(_cidr_of(cidr).network.prefixlen),
}
