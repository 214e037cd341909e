"""The ReplicationController controller against kube-sim, judged by the real kubectl and the API: ``kubectl
apply`` an RC, its pods appear with the RC as controller owner, ``kubectl scale rc`` works both ways, the
status fields are upstream's (no terminatingReplicas), and the events name the RC from ``replication-controller``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from controller_manager.api.meta import controller_ref
from controller_manager.api.pods import is_pod_active
from controller_manager.api.resources import EVENTS, PODS, REPLICATIONCONTROLLERS
from controller_manager.controllers.replication import ReplicationManager
from tests.controllers.harness import Harness, controller_harness, wait_for

KUBECTL = Path(sys.executable).parent / "kubectl"

MANIFEST = {
    "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 3, "selector": {"app": "web"},
             "template": {"metadata": {"labels": {"app": "web", "tier": "frontend"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
}


async def kubectl(kubeconfig: Path, *args: str, stdin: bytes | None = None, timeout: float = 30.0) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), f"--kubeconfig={kubeconfig}", *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return out.decode()


async def owned_active_pods(h: Harness, rc: dict[str, Any]) -> list[dict[str, Any]]:
    pods = (await h.client.list(PODS, "default")).get("items") or []
    return [p for p in pods if is_pod_active(p) and (controller_ref(p) or {}).get("uid") == rc["metadata"]["uid"]]


async def until_status(h: Harness, **expected: int) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        rc = await h.client.get(REPLICATIONCONTROLLERS, "web", "default")
        status = rc.get("status") or {}
        return rc if all(status.get(k, 0) == v for k, v in expected.items()) else None

    return await wait_for(check, timeout=20, what=f"rc status {expected}")


async def test_kubectl_create_scale_and_status() -> None:
    async with controller_harness(ReplicationManager) as h:
        config = h.cluster.kubeconfig_path
        out = await kubectl(config, "apply", "-f", "-", stdin=json.dumps(MANIFEST).encode())
        assert "replicationcontroller/web created" in out

        rc = await until_status(h, replicas=3, readyReplicas=3, availableReplicas=3, fullyLabeledReplicas=3)
        status = rc["status"]
        assert set(status) == {"replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                               "observedGeneration"}
        assert status["observedGeneration"] == rc["metadata"]["generation"]
        pods = await owned_active_pods(h, rc)
        assert len(pods) == 3
        for pod in pods:
            ref = controller_ref(pod) or {}
            assert (ref.get("apiVersion"), ref.get("kind"), ref.get("name")) == ("v1", "ReplicationController", "web")
            assert ref.get("blockOwnerDeletion") is True
            assert pod["metadata"]["generateName"] == "web-"
            assert pod["metadata"]["labels"] == {"app": "web", "tier": "frontend"}

        table = await kubectl(config, "get", "rc", "web")
        assert table.split("\n")[1].split()[:4] == ["web", "3", "3", "3"]

        assert "replicationcontroller/web scaled" in await kubectl(config, "scale", "rc/web", "--replicas=1")
        rc = await until_status(h, replicas=1, readyReplicas=1, availableReplicas=1)
        await wait_for(lambda: _count(h, rc, 1), timeout=20, what="one pod left")
        assert await kubectl(config, "get", "rc", "web", "-o", "jsonpath={.spec.replicas}") == "1"

        await kubectl(config, "scale", "rc/web", "--replicas=2")
        rc = await until_status(h, replicas=2, readyReplicas=2, availableReplicas=2)
        assert (rc["status"]["observedGeneration"], rc["metadata"]["generation"]) == (3, 3)
        assert "terminatingReplicas" not in rc["status"]

        async def events() -> list[dict[str, Any]] | None:
            items = (await h.client.list(EVENTS, "default")).get("items") or []
            mine = [e for e in items if (e.get("involvedObject") or {}).get("kind") == "ReplicationController"]
            reasons = {e.get("reason") for e in mine}
            return mine if {"SuccessfulCreate", "SuccessfulDelete"} <= reasons else None

        for event in await wait_for(events, timeout=20, what="the RC's events"):
            assert event["source"]["component"] == "replication-controller"
            assert event["involvedObject"]["name"] == "web"
            assert event["involvedObject"]["apiVersion"] == "v1"
            assert event["message"].startswith(("Created pod: web-", "Deleted pod: web-"))


async def _count(h: Harness, rc: dict[str, Any], n: int) -> bool:
    return len(await owned_active_pods(h, rc)) == n


async def test_orphans_are_adopted_and_released_pods_replaced() -> None:
    async with controller_harness(ReplicationManager) as h:
        orphan = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "orphan", "namespace": "default", "labels": {"app": "web"}},
                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
        await h.client.create(PODS, orphan, "default")
        manifest = {**MANIFEST, "spec": {**MANIFEST["spec"], "replicas": 2}}
        rc = await h.client.create(REPLICATIONCONTROLLERS, manifest, "default")
        await until_status(h, replicas=2)
        adopted = await h.client.get(PODS, "orphan", "default")
        assert (controller_ref(adopted) or {}).get("uid") == rc["metadata"]["uid"]
        assert len(await owned_active_pods(h, rc)) == 2

        # Relabel the adopted pod: the RC releases it and makes a replacement.
        await h.client.patch(PODS, "orphan", {"metadata": {"labels": {"app": "other"}}}, "default")

        async def released() -> bool:
            pod = await h.client.get(PODS, "orphan", "default")
            return controller_ref(pod) is None and await _count(h, rc, 2)

        await wait_for(released, timeout=20, what="release and replacement")
