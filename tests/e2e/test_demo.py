"""`make demo` as a newcomer runs it: everything converges, Ctrl-C stops it cleanly, nothing is left running."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

ROOT = Path(__file__).resolve().parents[2]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_demo_converges_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller_manager.demo", "--workdir", str(tmp_path), "--nodes", "3",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=ROOT, start_new_session=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(90):
            # The Deployment completes its first rollout, the demo rolls it to a new image, that completes too.
            while True:
                line = (await proc.stdout.readline()).decode()
                assert line, "demo ended early:\n" + "".join(seen[-40:])
                seen.append(line)
                parts = line.split()  # DEPLOYMENT READY UP-TO-DATE AVAILABLE REV PROGRESS
                if parts[:1] == ["web"] and parts[4:6] == ["2", "complete"]:
                    break
        children = [int(p) for p in (tmp_path / "pids").read_text().split()] if (tmp_path / "pids").exists() else []
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group gets SIGINT
        rest, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    out = "".join(seen) + rest.decode()
    assert proc.returncode == 0, out[-3000:]
    assert "kubeconfig:" in out
    assert "kubectl rollout status deployment/web" in out
    assert out.rstrip().endswith("demo stopped; nothing left running."), out[-2000:]
    assert "Traceback" not in out
    for pid in children:
        assert not _running(pid)
