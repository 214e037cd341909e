"""The daemon's EndpointSlice mirroring controller as users see it: ``kubectl apply`` a Service without selector
and a hand-written Endpoints, ``kubectl get endpointslices`` shows the mirrored slices (labels, owner, ready and
not-ready addresses, annotations but kubectl's last-applied one); they follow an update of the Endpoints, and go
when the Endpoints is deleted."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
MIRRORING = "endpointslicemirroring-controller.k8s.io"


def manifest(ready: list[str], not_ready: list[str], port: int = 9376) -> list[dict[str, Any]]:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
               "spec": {"ports": [{"name": "sql", "port": 5432, "targetPort": port}]}}
    subset: dict[str, Any] = {"ports": [{"name": "sql", "port": port, "protocol": "TCP"}]}
    if ready:
        subset["addresses"] = [{"ip": ip} for ip in ready]
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": "db", "labels": {"tier": "data"}, "annotations": {"team": "storage"}},
                 "subsets": [subset]}
    return [service, endpoints]


async def mirrored(kubectl: Kubectl) -> list[dict[str, Any]]:
    out = await kubectl.ok("get", "endpointslices", "-l", f"{MANAGED_BY}={MIRRORING}", "-o", "json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def endpoints_of(slices: list[dict[str, Any]]) -> dict[str, bool]:
    return {e["addresses"][0]: e["conditions"]["ready"] for s in slices for e in s.get("endpoints") or ()}


async def until(kubectl: Kubectl, want: dict[str, bool], what: str) -> list[dict[str, Any]]:
    async def check() -> tuple[list[dict[str, Any]]] | None:
        slices = await mirrored(kubectl)
        return (slices,) if endpoints_of(slices) == want else None  # a tuple: truthy even with no slice

    (slices,) = await wait_until(check, timeout=30, what=what)
    return slices


async def test_custom_endpoints_are_mirrored(processes: Processes, sim: KubeSim, kubectl: Kubectl) -> None:
    await start_manager(processes, sim, "--controllers=endpointslicemirroring")
    path = processes.directory / "db.yaml"
    path.write_text(yaml.safe_dump_all(manifest(["10.4.0.1", "10.4.0.2"], ["10.4.0.3"])))
    await kubectl.ok("apply", "-f", str(path))

    [slice_] = await until(kubectl, {"10.4.0.1": True, "10.4.0.2": True, "10.4.0.3": False}, "the mirrored slice")
    m = slice_["metadata"]
    assert m["name"].startswith("db-")
    assert m["labels"] == {"tier": "data", "kubernetes.io/service-name": "db", MANAGED_BY: MIRRORING}
    # The Endpoints' annotations are mirrored, but not kubectl's record of what it applied.
    assert m["annotations"] == {"team": "storage"}
    ep = json.loads(await kubectl.ok("get", "endpoints", "db", "-o", "json"))
    assert "kubectl.kubernetes.io/last-applied-configuration" in ep["metadata"]["annotations"]
    [owner] = m["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Endpoints", "db", ep["metadata"]["uid"], True)
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "sql", "port": 9376, "protocol": "TCP"}]

    # An update of the Endpoints (an address gone, one added, an IPv6 one) is followed.
    path.write_text(yaml.safe_dump_all(manifest(["10.4.0.2", "10.4.0.9", "fd00::9"], [])))
    await kubectl.ok("apply", "-f", str(path))
    slices = await until(kubectl, {"10.4.0.2": True, "10.4.0.9": True, "fd00::9": True}, "the updated slices")
    assert sorted(s["addressType"] for s in slices) == ["IPv4", "IPv6"]
    assert m["name"] in {s["metadata"]["name"] for s in slices}  # the IPv4 slice was updated in place

    # The skip-mirror label takes the Endpoints out of mirroring: its slices go.
    await kubectl.ok("label", "endpoints", "db", "endpointslice.kubernetes.io/skip-mirror=true")
    await until(kubectl, {}, "no mirrored slice while skip-mirror is set")
    await kubectl.ok("label", "endpoints", "db", "endpointslice.kubernetes.io/skip-mirror-")
    await until(kubectl, {"10.4.0.2": True, "10.4.0.9": True, "fd00::9": True}, "the slices back")

    await kubectl.ok("delete", "endpoints", "db")
    await until(kubectl, {}, "the mirrored slices deleted with the Endpoints")
    # The Service is untouched.
    await kubectl.ok("get", "service", "db")
