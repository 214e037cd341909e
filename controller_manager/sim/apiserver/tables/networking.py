"""Printers of ``networking.k8s.io``: ingresses, ingress classes, network policies, service CIDRs, IP addresses."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    format_label_selector,
    name,
    spec,
    status,
)


def _hosts(rules: list[Obj]) -> str:
    """``formatHosts``: the first three hosts set, ``*`` for none, `` + N more...`` (counting rules) once a
    rule follows the third host."""
    limit, more = 3, False
    hosts: list[str] = []
    for rule in rules:
        more = more or len(hosts) == limit
        if not more and rule.get("host"):
            hosts.append(str(rule["host"]))
    if not hosts:
        return "*"
    text = ",".join(hosts)
    return f"{text} + {len(rules) - limit} more..." if more else text


def _ingress_cells(ing: Obj, now: float) -> list[Any]:
    ing_spec = spec(ing)
    found = {str(i.get("ip") or i.get("hostname") or "")
             for i in (status(ing).get("loadBalancer") or {}).get("ingress") or []}
    found.discard("")
    return [name(ing), ing_spec.get("ingressClassName") or "<none>", _hosts(ing_spec.get("rules") or []),
            ",".join(sorted(found)), "80, 443" if ing_spec.get("tls") else "80", age(ing, now)]


def _ingress_class_cells(ic: Obj, now: float) -> list[Any]:
    params = spec(ic).get("parameters")
    text = "<none>"
    if params is not None:
        text = str(params.get("kind") or "")
        if params.get("apiGroup") is not None:
            text += "." + str(params["apiGroup"])
        text += "/" + str(params.get("name") or "")
    return [name(ic), str(spec(ic).get("controller") or ""), text, age(ic, now)]


def _ip_address_cells(ip: Obj, now: float) -> list[Any]:
    parent = spec(ip).get("parentRef")
    text = "<none>"
    if parent is not None:
        group, resource = str(parent.get("group") or ""), str(parent.get("resource") or "")
        text = (f"{resource}.{group}" if group else resource).lower()
        if parent.get("namespace"):
            text += "/" + str(parent["namespace"])
        text += "/" + str(parent.get("name") or "")
    return [name(ip), text, age(ip, now)]


PRINTERS: dict[str, Printer] = {
    "Ingress": Printer((NAME, Column("Class"), Column("Hosts"), Column("Address"), Column("Ports"), AGE),
                       _ingress_cells),
    "IngressClass": Printer((NAME, Column("Controller"), Column("Parameters"), AGE), _ingress_class_cells),
    "NetworkPolicy": Printer((NAME, Column("Pod-Selector"), AGE),
                             lambda o, now: [name(o), format_label_selector(spec(o).get("podSelector") or {}),
                                             age(o, now)]),
    "ServiceCIDR": Printer((NAME, Column("CIDRs"), AGE),
                           lambda o, now: [name(o), ",".join(spec(o).get("cidrs") or []), age(o, now)]),
    # Upstream's IPAddress columns stop at ParentRef although each row also carries its age.
    "IPAddress": Printer((NAME, Column("ParentRef")), _ip_address_cells),
}
