"""The ``kube-sim`` command as a process: the one ready line, a kubeconfig kubectl can use, a clean exit
on SIGTERM/SIGINT, and one error line for bad flags."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
KUBE_SIM = str(BIN / "kube-sim")
KUBECTL = str(BIN / "kubectl")
READY = re.compile(r"^kube-sim ready: (http://127\.0\.0\.1:\d+)\n$")


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(KUBE_SIM, *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, id="sigterm"), pytest.param(signal.SIGINT, id="sigint")])
async def test_serves_until_signalled(tmp_path: Path, sig: signal.Signals) -> None:
    kubeconfig = tmp_path / "kc"
    proc = await start("--nodes", "2", "--zones", "2", "--port", "0", "--kubeconfig", str(kubeconfig),
                       "--faults", "latency:seconds=0.001")
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        match = READY.match(line)
        assert match, line
        assert kubeconfig.exists()
        kubectl = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), "get", "nodes",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "HOME": str(tmp_path)})
        out, err = await asyncio.wait_for(kubectl.communicate(), 60)
        assert kubectl.returncode == 0, err
        assert out.decode().count(" Ready ") == 2
        proc.send_signal(sig)
        rest, _ = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0
        assert rest == b""  # exactly one line on stdout
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--nodes", "-1"], "--nodes", id="negative-nodes"),
        pytest.param(["--port", "70000"], "--port", id="port-range"),
        pytest.param(["--bogus"], "unrecognized arguments", id="unknown-flag"),
        pytest.param(["--faults", "explode"], "--faults", id="bad-fault-spec"),
    ],
)
async def test_bad_flags_one_error_line(args: list[str], needle: str) -> None:
    proc = await start(*args)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert out == b""
    lines = err.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("kube-sim: error:")
    assert needle in lines[0]
