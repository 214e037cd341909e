"""Real ``kubectl`` against kube-sim with the Deployment and ReplicaSet controllers running in-process:
``kubectl rollout status`` sees our rollouts exactly as it sees kube-controller-manager's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.harness import Harness, controller_harness

KUBECTL = str(Path(sys.executable).parent / "kubectl")


class Kubectl:
    def __init__(self, h: Harness, home: Path) -> None:
        self.kubeconfig = str(h.cluster.kubeconfig_path)
        self.home = home

    async def __call__(self, *args: str, stdin: bytes | None = None, timeout: float = 60.0) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.home / "cache"), "-n", "default", *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "HOME": str(self.home)})
        try:
            out, _ = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    async def ok(self, *args: str, stdin: bytes | None = None) -> str:
        code, out = await self(*args, stdin=stdin)
        assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {out}"
        return out


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        yield Kubectl(h, tmp_path)


def manifest(name: str, *, image: str = "nginx:1", progress_deadline: int | None = None,
             pod_annotations: dict[str, str] | None = None) -> bytes:
    spec: dict[str, object] = {
        "replicas": 3,
        "selector": {"matchLabels": {"app": name}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": {"app": name}, "annotations": pod_annotations or {}},
                     "spec": {"containers": [{"name": "c", "image": image}]}},
    }
    if progress_deadline is not None:
        spec["progressDeadlineSeconds"] = progress_deadline
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": name, "namespace": "default"}, "spec": spec}).encode()


async def images(kubectl: Kubectl, name: str) -> set[str]:
    out = await kubectl.ok("get", "pods", "-l", f"app={name}", "-o", "json")
    pods = json.loads(out)["items"]
    return {p["spec"]["containers"][0]["image"] for p in pods if not p["metadata"].get("deletionTimestamp")}


async def test_rollout_status_follows_create_set_image_undo_and_restart(kubectl: Kubectl) -> None:
    await kubectl.ok("create", "-f", "-", stdin=manifest("web"))
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out

    await kubectl.ok("set", "image", "deployment/web", "c=nginx:2")
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out
    assert await images(kubectl, "web") == {"nginx:2"}

    await kubectl.ok("rollout", "undo", "deployment/web")
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out
    assert await images(kubectl, "web") == {"nginx:1"}
    history = await kubectl.ok("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]

    await kubectl.ok("rollout", "restart", "deployment/web")
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out
    described = await kubectl.ok("describe", "deployment", "web")
    assert "NewReplicaSetAvailable" in described
    assert "ScalingReplicaSet" in described


async def test_rollout_status_reports_an_exceeded_progress_deadline(kubectl: Kubectl) -> None:
    await kubectl.ok("create", "-f", "-", stdin=manifest(
        "stuck", progress_deadline=2, pod_annotations={"sim.controller-manager.io/ready-after-seconds": "100000"}))
    code, out = await kubectl("rollout", "status", "deployment/stuck", "--timeout=30s")
    assert code != 0
    assert 'deployment "stuck" exceeded its progress deadline' in out
