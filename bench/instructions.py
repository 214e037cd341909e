"""kube-sim's cost per write request counted in CPU instructions: ``python bench/instructions.py [TREE ...]``.

Prints, for each source tree (default: this one), the instructions one pod create and one pod status update
cost, client and server in one process over loopback HTTP, as ``bench/apiserver.py`` sends them. Counted with
valgrind's cachegrind (``valgrind`` must be on the PATH), so the figure does not move with the machine's load
the way the requests-per-second figures do: use it to judge a change to the write path, and run the tree
before the change beside it (``git worktree add /tmp/before <commit>``).

Method: each kind is run at 40 and at 240 requests in a fresh interpreter; the difference divided by 200 is
the cost per request, start-up and import left out. The status-update figure is the create-then-update run's
per-request cost less the create's. The bodies are those of ``bench/apiserver.py``, repeated here so that a
tree from before that module changed can be measured with the same requests.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

POD_PATH = "/api/v1/namespaces/default/pods"
SMALL, LARGE = 40, 240
CONCURRENCY = 8


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{i}", "labels": {"app": "bench", "pod-template-hash": "7d4b9c8f5"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench-7d4b9c8f5",
                                              "uid": "0b7c8a52-9d3e-4f1a-8c55-2f6e1d9a7b10", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"nodeName": "node-1", "containers": [{
                "name": "app", "image": "registry.example.com/team/app:1.2.3",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "env": [{"name": "MODE", "value": "production"}]}]}}


def running(obj: dict[str, Any]) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    return {**obj, "status": {
        "phase": "Running", "podIP": "10.0.0.1", "hostIP": "192.168.0.1", "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                 "PodScheduled")],
        "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "started": True,
                               "image": "registry.example.com/team/app:1.2.3", "imageID": "sha256:abc",
                               "containerID": "containerd://1", "state": {"running": {"startedAt": now}}}]}}


async def _pooled(n: int, call: Any) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await call(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def _requests(n: int, update: bool) -> None:
    """``n`` pod creates against a fresh kube-sim, then (``update``) one status update of each."""
    import aiohttp
    import orjson
    from aiohttp import web

    from controller_manager.sim.apiserver import ApiServer, build_app

    runner = web.AppRunner(build_app(ApiServer()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    headers = {"Content-Type": "application/json"}
    created: dict[int, Any] = {}
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as session:
        async def create(i: int) -> None:
            async with session.post(POD_PATH, data=orjson.dumps(pod(i)), headers=headers) as resp:
                assert resp.status == 201, await resp.text()
                created[i] = orjson.loads(await resp.read())

        async def status(i: int) -> None:
            obj = running(created[i])
            async with session.put(f"{POD_PATH}/{obj['metadata']['name']}/status", data=orjson.dumps(obj),
                                   headers=headers) as resp:
                assert resp.status == 200, await resp.text()

        await _pooled(n, create)
        if update:
            await _pooled(n, status)
    await runner.cleanup()


def _count(tree: Path, n: int, update: bool) -> int:
    """Instructions of one run (``--worker``) of ``n`` requests of each kind, under cachegrind."""
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
         __file__, "--worker", str(tree), str(n), "cu" if update else "c"],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def measure(tree: Path) -> tuple[float, float]:
    """(instructions per pod create, per pod status update) for the source tree ``tree``."""
    per = LARGE - SMALL
    create = (_count(tree, LARGE, False) - _count(tree, SMALL, False)) / per
    both = (_count(tree, LARGE, True) - _count(tree, SMALL, True)) / per
    return create, both - create


def main(argv: list[str]) -> None:
    if argv[:1] == ["--worker"]:
        tree, n, mode = argv[1:4]
        sys.path.insert(0, tree)
        asyncio.run(_requests(int(n), mode == "cu"))
        return
    for root in [Path(t).resolve() for t in argv] or [Path(__file__).resolve().parent.parent]:
        create, update = measure(root)
        print(f"{root}: create {create / 1e6:.2f}M instructions/request  status update {update / 1e6:.2f}M")


if __name__ == "__main__":
    main(sys.argv[1:])
