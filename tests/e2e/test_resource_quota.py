"""The resource quota controller as it runs, driven by real kubectl against kube-sim: a quota's ``status.used``
follows the pods created and deleted, and a create over quota is refused with the API server's 403."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_for_default_service_account, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]


def _pod_manifest(directory: Path, name: str, cpu: str) -> str:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx",
                                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}
    path = directory / f"{name}.json"
    path.write_text(json.dumps(pod))
    return str(path)


async def _used(kubectl: Kubectl) -> dict[str, str]:
    out = await kubectl.ok("get", "resourcequota", "compute", "-o", "jsonpath={.status.used}")
    return json.loads(out) if out.strip() else {}


async def test_quota_usage_follows_pods_and_refuses_a_create_over_quota(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    await start_manager(processes, sim, "--controllers=resourcequota,serviceaccount")
    await wait_for_default_service_account(kubectl)
    await kubectl.ok("create", "quota", "compute", "--hard=pods=2,requests.cpu=1")

    async def used_is(want: dict[str, str]) -> bool:
        return await _used(kubectl) == want

    await wait_until(lambda: used_is({"pods": "0", "requests.cpu": "0"}), timeout=60.0)
    await kubectl.ok("create", "-f", _pod_manifest(tmp_path, "a", "600m"))
    await kubectl.ok("create", "-f", _pod_manifest(tmp_path, "b", "300m"))
    await wait_until(lambda: used_is({"pods": "2", "requests.cpu": "900m"}))

    code, out = await kubectl("create", "-f", _pod_manifest(tmp_path, "c", "200m"))
    assert code == 1
    assert ('pods "c" is forbidden: exceeded quota: compute, requested: pods=1,requests.cpu=200m, '
            "used: pods=2,requests.cpu=900m, limited: pods=2,requests.cpu=1") in out, out
    assert out.startswith("Error from server (Forbidden)"), out

    await kubectl.ok("delete", "pod", "a")
    await wait_until(lambda: used_is({"pods": "1", "requests.cpu": "300m"}))
    await kubectl.ok("create", "-f", _pod_manifest(tmp_path, "c", "200m"))
    await wait_until(lambda: used_is({"pods": "2", "requests.cpu": "500m"}))
