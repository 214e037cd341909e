"""The TTL controller against kube-sim, judged by the real kubectl: every Node carries
``node.alpha.kubernetes.io/ttl: "0"`` in a small cluster; past 100 Nodes new and updated Nodes get 15; back
under 90 they get 0 again (between 90 and 100 it stays 15: hysteresis)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from controller_manager.api.resources import NODES
from controller_manager.controllers.ttl import TTL_ANNOTATION, TTLController
from tests.controllers.harness import Harness, controller_harness, wait_for

KUBECTL = Path(sys.executable).parent / "kubectl"
JSONPATH = ("jsonpath={range .items[*]}{.metadata.name}="
            "{.metadata.annotations.node\\.alpha\\.kubernetes\\.io/ttl}{\"\\n\"}{end}")


async def kubectl(kubeconfig: Path, *args: str, timeout: float = 30.0) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), f"--kubeconfig={kubeconfig}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return out.decode()


async def ttls(h: Harness) -> dict[str, str]:
    out = await kubectl(h.cluster.kubeconfig_path, "get", "nodes", "-o", JSONPATH)
    return dict(line.split("=", 1) for line in out.splitlines() if line)


async def until_ttls(h: Harness, expected: dict[str, str], what: str) -> None:
    async def check() -> bool:
        return await ttls(h) == expected

    await wait_for(check, timeout=30, interval=0.2, what=what)


async def touch(h: Harness, names: list[str], value: str) -> None:
    """An update of each node (as a kubelet's status update would be): the controller looks at it again."""
    await asyncio.gather(*(h.client.patch(NODES, n, {"metadata": {"labels": {"touched": value}}}) for n in names))


async def test_ttl_annotation_follows_cluster_size() -> None:
    async with controller_harness(TTLController, nodes=3) as h:
        sim_nodes = sorted(await ttls(h))
        assert len(sim_nodes) == 3
        # (kube-sim's kubelets, as real ones, register their Node with the annotation at "0")
        await until_ttls(h, dict.fromkeys(sim_nodes, "0"), "the TTL 0 on every node")
        described = await kubectl(h.cluster.kubeconfig_path, "get", "node", sim_nodes[0], "-o",
                                  "jsonpath={.metadata.annotations}")
        assert f'"{TTL_ANNOTATION}":"0"' in described

        # 101 nodes: the 101st is past the first range's 100, so the TTL is 15 s.
        extra = [f"extra-{i:03d}" for i in range(98)]
        for name in extra:
            await h.client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        await touch(h, [*sim_nodes, *extra], "1")
        await until_ttls(h, dict.fromkeys([*sim_nodes, *extra], "15"), "the TTL 15 on 101 nodes")

        # 95 nodes: still within the second range (down to 90), so still 15 s.
        for name in extra[-6:]:
            await h.client.delete(NODES, name)
        kept = [*sim_nodes, *extra[:-6]]
        await touch(h, kept, "2")
        await until_ttls(h, dict.fromkeys(kept, "15"), "the TTL still 15 at 95 nodes")

        # 89 nodes: below 90, back to 0 s.
        for name in extra[86:92]:
            await h.client.delete(NODES, name)
        kept = [*sim_nodes, *extra[:86]]
        await touch(h, kept, "3")
        await until_ttls(h, dict.fromkeys(kept, "0"), "the TTL 0 at 89 nodes")
