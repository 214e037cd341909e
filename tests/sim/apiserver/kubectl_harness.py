"""The real kubectl against an in-process kube-sim app: a kubeconfig pointing at it, and a runner."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from controller_manager.sim.apiserver import ApiServer, build_app

KUBECTL = Path(sys.executable).parent / "kubectl"


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [str(KUBECTL), f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}"]

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(*self.base, *args, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)

    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        proc = await asyncio.create_subprocess_exec(*self.base, *args, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 30)
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
        return out.decode()


@contextlib.asynccontextmanager
async def serve(api: ApiServer, tmp_path: Path) -> AsyncIterator[Kubectl]:
    """``api`` served on a loopback port for the duration, and a kubectl whose kubeconfig points at it (plain
    HTTP without credentials: the in-process app serves those as the admin)."""
    runner = web.AppRunner(build_app(api))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: sim, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: admin, user: {{}}}}]
contexts: [{{name: sim, context: {{cluster: sim, user: admin, namespace: default}}}}]
current-context: sim
""")
    try:
        yield Kubectl(kubeconfig, tmp_path / "cache")
    finally:
        await runner.cleanup()
