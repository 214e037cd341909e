"""The real kubectl judges the DaemonSet controller's work: ``kubectl rollout status daemonset/X`` succeeds after
the DaemonSet is created and after its template changes, and ``kubectl rollout history`` lists the revisions."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from controller_manager.controllers.daemonset import DaemonSetController
from tests.controllers.harness import controller_harness

KUBECTL = Path(sys.executable).parent / "kubectl"

MANIFEST = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
             "template": {"metadata": {"labels": {"app": "agent"}},
                          "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}},
}


async def kubectl(kubeconfig: Path, *args: str, stdin: bytes | None = None, timeout: float = 30.0) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), f"--kubeconfig={kubeconfig}", *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return out.decode()


async def test_kubectl_rollout_status_and_history() -> None:
    async with controller_harness(DaemonSetController, nodes=3) as h:
        config = h.cluster.kubeconfig_path
        assert "daemonset.apps/agent created" in await kubectl(config, "apply", "-f", "-",
                                                               stdin=json.dumps(MANIFEST).encode())
        out = await kubectl(config, "rollout", "status", "daemonset/agent", "--timeout=30s")
        assert 'daemon set "agent" successfully rolled out' in out

        await kubectl(config, "set", "image", "daemonset/agent", "agent=agent:2")
        out = await kubectl(config, "rollout", "status", "daemonset/agent", "--timeout=30s")
        assert 'daemon set "agent" successfully rolled out' in out
        images = await kubectl(config, "get", "pods", "-l", "app=agent", "-o",
                               "jsonpath={.items[*].spec.containers[0].image}")
        assert images.split() == ["agent:2"] * 3

        history = await kubectl(config, "rollout", "history", "daemonset/agent")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
        got = await kubectl(config, "get", "ds", "agent", "-o", "jsonpath={.status.numberAvailable}/"
                            "{.status.desiredNumberScheduled}/{.status.updatedNumberScheduled}")
        assert got == "3/3/3"
