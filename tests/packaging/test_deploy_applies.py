"""The plain manifests in deploy/ are accepted by an API server: real kubectl applies them to kube-sim."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from controller_manager.api.resources import CLUSTERROLES, DEPLOYMENTS, ROLEBINDINGS, SERVICEACCOUNTS
from controller_manager.sim.cluster import SimCluster

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = str(Path(sys.executable).parent / "kubectl")


async def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_kubectl_applies_deploy_to_kube_sim(tmp_path: Path) -> None:
    async with SimCluster(nodes=1, kubeconfig_path=tmp_path / "kubeconfig") as cluster:
        code, out = await kubectl(tmp_path / "kubeconfig", "apply", "-f", str(ROOT / "deploy"))
        assert code == 0, out
        assert "deployment.apps/controller-manager created" in out
        api = cluster.api
        assert api.get(DEPLOYMENTS, "kube-system", "controller-manager")["spec"]["replicas"] == 2
        assert api.get(SERVICEACCOUNTS, "kube-system", "controller-manager")
        assert api.get(CLUSTERROLES, "", "controller-manager")["rules"]
        assert api.get(ROLEBINDINGS, "kube-system", "controller-manager-leader-election")
        # A second apply is a no-op patch, as against a real cluster.
        code, out = await kubectl(tmp_path / "kubeconfig", "apply", "-f", str(ROOT / "deploy"))
        assert code == 0, out
        assert "deployment.apps/controller-manager unchanged" in out
