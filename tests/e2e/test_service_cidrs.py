"""The daemon's ServiceCIDR controller as users see it, through real kubectl against kube-sim: the
``kubernetes`` ServiceCIDR (and one a user adds) gets the ``networking.k8s.io/service-cidr-finalizer``
finalizer and ``Ready=True``; deleting a ServiceCIDR while an allocated IPAddress lies in it alone leaves it
``Ready=False``/``Terminating`` with its finalizer; once the IPAddress is gone the ServiceCIDR goes."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

FINALIZER = "networking.k8s.io/service-cidr-finalizer"


async def get(kubectl: Kubectl, kind: str, name: str) -> dict[str, Any] | None:
    code, out = await kubectl("get", kind, name, "-o", "json")
    return json.loads(out) if code == 0 else None


def ready(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or ():
        if condition["type"] == "Ready":
            return dict(condition)
    return None


async def until_ready(kubectl: Kubectl, name: str, status: str, message: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await get(kubectl, "servicecidr", name)
        condition = ready(obj)
        ok = (obj is not None and FINALIZER in obj["metadata"].get("finalizers", ()) and condition is not None
              and (condition["status"], condition["message"]) == (status, message))
        return obj if ok else None

    return await wait_until(check, timeout=30, what=f"ServiceCIDR {name} Ready={status} with its finalizer")


async def test_service_cidr_finalizer_waits_for_ip_addresses(processes: Processes, sim: KubeSim,
                                                              kubectl: Kubectl) -> None:
    await start_manager(processes, sim, "--controllers=service-cidr-controller")
    default = await until_ready(kubectl, "kubernetes", "True", "Kubernetes Service CIDR is ready")
    assert ready(default)["reason"] == ""  # type: ignore[index]

    manifest = [
        {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
         "spec": {"cidrs": ["10.200.0.0/24"]}},
        # An address of the range in use, as the API server's allocator records one.
        {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
         "metadata": {"name": "10.200.0.7", "labels": {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                                       "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
         "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "legacy"}}},
    ]
    path = processes.directory / "extra.yaml"
    path.write_text(yaml.safe_dump_all(manifest))
    await kubectl.ok("apply", "-f", str(path))
    await until_ready(kubectl, "extra", "True", "Kubernetes Service CIDR is ready")

    await kubectl.ok("delete", "servicecidr", "extra", "--wait=false")
    terminating = await until_ready(
        kubectl, "extra", "False",
        "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR")
    assert ready(terminating)["reason"] == "Terminating"  # type: ignore[index]
    assert terminating["metadata"].get("deletionTimestamp")

    await kubectl.ok("delete", "ipaddress", "10.200.0.7")

    async def gone() -> bool:
        return await get(kubectl, "servicecidr", "extra") is None

    # Released no sooner than the 10s grace period after the deletion began.
    await wait_until(gone, timeout=40, what="the ServiceCIDR deleted once its IPAddress is gone")
    # The default range, which holds the kubernetes Service's address, is untouched.
    assert await get(kubectl, "servicecidr", "kubernetes") is not None
