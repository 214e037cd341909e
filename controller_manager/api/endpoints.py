"""Endpoints subsets in canonical form (upstream's ``pkg/api/v1/endpoints``): ``RepackSubsets`` and
``SortSubsets``, shared by the endpoints controller and the EndpointSlice mirroring controller.

Guarantees:
- Nothing here does I/O or mutates its inputs. Subsets, addresses and ports are the API's JSON; a Go nil list is
  an absent key, an empty Go list an empty list (the wire omits both).
- :func:`repack_subsets` regroups any list of subsets into the fewest subsets: every address is kept once per
  (IP, target UID), first occurrence wins; an address not ready for some port is not ready for it; addresses
  offering the same ports with the same readiness share one subset. A subset without ports keeps its addresses
  (with no ``ports``); a port numbered 0 or less groups like no port at all, as upstream's sentinel does.
- :func:`sort_subsets` is upstream's canonical order, byte for byte: addresses by IP (bytewise) then target UID;
  ports and subsets by the MD5 of the text ``spew`` prints for the Go value under ``%#v`` (``DeepHashObject``).
  Two controllers given the same input therefore write the same JSON.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["repack_subsets", "sort_subsets", "spew_port", "spew_subset"]

Obj = Mapping[str, Any]


def _list(value: Any) -> list[Any]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


# --- spew's %#v of the Go values ---------------------------------------------------------------------------
#
# Upstream orders ports and subsets by the MD5 of go-spew's ``%#v`` text of the Go struct (SortKeys, methods
# disabled). Under ``%#v`` spew prints a value's type in parentheses before it, except for the elements of a
# slice and the value a pointer points to; struct fields print as ``Name:value`` separated by spaces, strings
# unquoted, nil slices and pointers as ``<nil>`` (after their type).

def _spew_str(type_name: str, value: Any) -> str:
    return f"({type_name}){'' if value is None else value}"


def _spew_str_ptr(value: Any) -> str:
    return "(*string)<nil>" if value is None else f"(*string){value}"


def _spew_slice(type_name: str, items: Any, element: Callable[[Obj], str]) -> str:
    if not isinstance(items, list):
        return f"({type_name})<nil>"
    return f"({type_name})[" + " ".join(element(i) for i in items if isinstance(i, Mapping)) + "]"


def _spew_object_reference(ref: Any) -> str:
    if not isinstance(ref, Mapping):
        return "(*v1.ObjectReference)<nil>"
    fields = (("Kind", "string", "kind"), ("Namespace", "string", "namespace"), ("Name", "string", "name"),
              ("UID", "types.UID", "uid"), ("APIVersion", "string", "apiVersion"),
              ("ResourceVersion", "string", "resourceVersion"), ("FieldPath", "string", "fieldPath"))
    body = " ".join(f"{go}:{_spew_str(t, ref.get(key) or '')}" for go, t, key in fields)
    return "(*v1.ObjectReference){" + body + "}"


def _spew_address(address: Obj) -> str:
    return ("{IP:" + _spew_str("string", address.get("ip") or "")
            + " Hostname:" + _spew_str("string", address.get("hostname") or "")
            + " NodeName:" + _spew_str_ptr(address.get("nodeName"))
            + " TargetRef:" + _spew_object_reference(address.get("targetRef")) + "}")


def _spew_port_fields(port: Obj) -> str:
    return ("{Name:" + _spew_str("string", port.get("name") or "")
            + " Port:" + _spew_str("int32", int(port.get("port") or 0))
            + " Protocol:" + _spew_str("v1.Protocol", port.get("protocol") or "")
            + " AppProtocol:" + _spew_str_ptr(port.get("appProtocol")) + "}")


def spew_port(port: Obj) -> str:
    """``%#v`` of a ``v1.EndpointPort`` value."""
    return "(v1.EndpointPort)" + _spew_port_fields(port)


def spew_subset(subset: Obj) -> str:
    """``%#v`` of a ``v1.EndpointSubset`` value."""
    return ("(v1.EndpointSubset){Addresses:"
            + _spew_slice("[]v1.EndpointAddress", subset.get("addresses"), _spew_address)
            + " NotReadyAddresses:"
            + _spew_slice("[]v1.EndpointAddress", subset.get("notReadyAddresses"), _spew_address)
            + " Ports:" + _spew_slice("[]v1.EndpointPort", subset.get("ports"), _spew_port_fields) + "}")


def _md5(text: str) -> bytes:
    return hashlib.md5(text.encode(), usedforsecurity=False).digest()


# --- order ------------------------------------------------------------------------------------------------

def _address_less(a: Obj, b: Obj) -> bool:
    """``LessEndpointAddress``: IP bytewise, then target UID (no target sorts first)."""
    ip_a, ip_b = str(a.get("ip") or "").encode(), str(b.get("ip") or "").encode()
    if ip_a != ip_b:
        return ip_a < ip_b
    ref_a, ref_b = a.get("targetRef"), b.get("targetRef")
    if not isinstance(ref_b, Mapping):
        return False
    if not isinstance(ref_a, Mapping):
        return True
    return str(ref_a.get("uid") or "") < str(ref_b.get("uid") or "")


def _address_cmp(a: Obj, b: Obj) -> int:
    if _address_less(a, b):
        return -1
    return 1 if _address_less(b, a) else 0


_ADDRESS_KEY = functools.cmp_to_key(_address_cmp)


def sort_subsets(subsets: Iterable[Obj]) -> list[dict[str, Any]]:
    """``SortSubsets``: a sorted copy (addresses, ports, then the subsets themselves)."""
    out: list[dict[str, Any]] = []
    for subset in subsets:
        copy = dict(subset)
        for field in ("addresses", "notReadyAddresses"):
            if isinstance(copy.get(field), list):
                copy[field] = sorted(_list(copy[field]), key=_ADDRESS_KEY)
        if isinstance(copy.get("ports"), list):
            copy["ports"] = sorted(_list(copy["ports"]), key=lambda p: _md5(spew_port(p)))
        out.append(copy)
    out.sort(key=lambda s: _md5(spew_subset(s)))
    return out


# --- packing ----------------------------------------------------------------------------------------------

_PortKey = tuple[str, int, str, Any]
_AddressKey = tuple[str, str]


def _port_key(port: Obj) -> _PortKey:
    return (str(port.get("name") or ""), int(port.get("port") or 0), str(port.get("protocol") or ""),
            port.get("appProtocol"))


def _address_key(address: Obj) -> _AddressKey:
    ref = address.get("targetRef")
    uid = str(ref.get("uid") or "") if isinstance(ref, Mapping) else ""
    return str(address.get("ip") or ""), uid


_SENTINEL: dict[str, Any] = {"port": -1}  # stands for "no ports", so port-less addresses are kept


def repack_subsets(subsets: Iterable[Obj]) -> list[dict[str, Any]]:
    """``RepackSubsets``: the same addresses and ports in the fewest subsets, sorted (see the module doc)."""
    addresses: dict[_AddressKey, Obj] = {}
    ports: dict[_PortKey, Obj] = {}
    readiness: dict[_PortKey, dict[_AddressKey, bool]] = {}
    for subset in subsets:
        for port in _list(subset.get("ports")) or [_SENTINEL]:
            pkey = _port_key(port)
            for field, ready in (("addresses", True), ("notReadyAddresses", False)):
                for address in _list(subset.get(field)):
                    akey = _address_key(address)
                    addresses.setdefault(akey, address)
                    ports.setdefault(pkey, port)
                    by_address = readiness.setdefault(pkey, {})  # a port nobody offers is dropped
                    # Not ready for a port anywhere means not ready for it.
                    if by_address.get(akey, True):
                        by_address[akey] = ready

    # Addresses (with their readiness) offering the same ports end in one subset.
    groups: dict[frozenset[tuple[_AddressKey, bool]], list[Obj] | None] = {}
    for pkey, by_address in readiness.items():
        group = frozenset(by_address.items())
        if pkey[1] > 0:
            existing = groups.get(group)
            groups[group] = [*(existing or ()), ports[pkey]]
        else:
            groups.setdefault(group, None)

    final: list[dict[str, Any]] = []
    for group, group_ports in groups.items():
        packed: dict[str, Any] = {}
        ready_addresses = [dict(addresses[a]) for a, r in group if r]
        not_ready_addresses = [dict(addresses[a]) for a, r in group if not r]
        if ready_addresses:
            packed["addresses"] = ready_addresses
        if not_ready_addresses:
            packed["notReadyAddresses"] = not_ready_addresses
        if group_ports is not None:
            packed["ports"] = [dict(p) for p in group_ports]
        final.append(packed)
    return sort_subsets(final)
