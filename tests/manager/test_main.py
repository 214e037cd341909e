"""The daemon as a process: flag errors, an unreachable API server, serving and a clean SIGTERM stop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from controller_manager.manager.main import main
from tests.manager.fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_kubeconfig(path: Path, server: str, token: str = "admin") -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "admin"}}],
        "current-context": "fake",
    }))
    return path


async def run_cli(*args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller_manager.manager.main", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "KUBECONFIG": "", "HOME": str(ROOT / ".no-home")},
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# Flag errors and --help end before any runtime starts, so they are judged in-process (main() returns the exit
# code; --help exits as argparse does); tests/e2e/test_startup.py runs the installed command for the same
# feature as a process.
@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--leader-elect-lease-duration=abc"],
                     'Error: argument --leader-elect-lease-duration: time: invalid duration "abc"', id="bad-duration"),
        pytest.param(["--leader-elect-lease-duration=fifteen"],
                     'Error: argument --leader-elect-lease-duration: time: invalid duration "fifteen"',
                     id="bad-duration-word"),
        pytest.param(["--concurrent-deployment-syncs=many"],
                     'Error: argument --concurrent-deployment-syncs: strconv.ParseInt: parsing "many": invalid syntax',
                     id="bad-int"),
        pytest.param(["--no-such-flag"], "Error: unrecognized arguments: --no-such-flag", id="unknown-flag"),
        pytest.param(["--controllers=*,-nosuch"], 'Error: "nosuch" is not in the list of known controllers',
                     id="unknown-controller"),
        pytest.param(["--controllers=*,-bogus"], 'Error: "bogus" is not in the list of known controllers',
                     id="unknown-disabled-controller"),
        pytest.param(["--controllers=deployment,bogus"], 'Error: "bogus" is not in the list of known controllers',
                     id="unknown-enabled-controller"),
    ],
)
def test_bad_flag_is_one_line_and_exit_1(args: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Flags are checked before any connection: the unreachable server is never what stops it.
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}")
    code = main([f"--kubeconfig={kubeconfig}", "--secure-port=0", *args])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert lines(err) == [message]


def test_help_lists_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    out, err = capsys.readouterr()
    assert exited.value.code == 0
    assert err == ""
    for flag in ("--kubeconfig", "--controllers", "--leader-elect-lease-duration", "--secure-port",
                 "--concurrent-deployment-syncs", "--node-monitor-grace-period", "--terminated-pod-gc-threshold"):
        assert flag in out


async def test_unreachable_api_server(tmp_path: Path) -> None:
    port = free_port()
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    code, _, err = await run_cli(f"--kubeconfig={kubeconfig}", "--secure-port=0")
    assert code == 1
    assert "Traceback" not in err
    records = [json.loads(line) for line in lines(err)]
    errors = [r for r in records if r["level"] == "error"]
    expected = f"cannot reach the API server at http://127.0.0.1:{port}: Connection refused"
    assert [e["event"] for e in errors] == [expected]


async def test_missing_kubeconfig(tmp_path: Path) -> None:
    code, _, err = await run_cli(f"--kubeconfig={tmp_path / 'nope'}", "--secure-port=0", "--log-format=text")
    assert code == 1
    assert "Traceback" not in err
    error_lines = [line for line in lines(err) if "[error" in line]
    assert len(error_lines) == 1
    assert "invalid configuration" in error_lines[0]


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        yield server


async def test_serves_then_stops_cleanly_on_sigterm(api: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "controller_manager.manager.main", f"--kubeconfig={kubeconfig}",
        "--leader-elect=false", f"--secure-port={port}", "--bind-address=127.0.0.1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session:
            base = f"https://127.0.0.1:{port}"

            async def get(path: str, token: str | None = None) -> tuple[int, str]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with session.get(base + path, headers=headers) as resp:
                    return resp.status, await resp.text()

            async with asyncio.timeout(30):
                while True:
                    try:
                        if await get("/readyz") == (200, "ok: leader"):
                            break
                    except aiohttp.ClientConnectionError:
                        pass
                    await asyncio.sleep(0.05)
            assert await get("/healthz") == (200, "ok")
            assert (await get("/livez?verbose"))[1] == "[+]ping ok\n[+]event-loop ok\nlivez check passed\n"
            assert (await get("/metrics"))[0] == 401
            status, body = await get("/metrics", token="admin")
            assert status == 200
            assert "controller_manager_event_loop_lag_seconds" in body
            assert (await get("/metrics", token="viewer"))[0] == 403
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    records = [json.loads(line) for line in lines(err.decode())]
    events = [r["event"] for r in records]
    assert "not implemented by this manager, skipped" in events
    assert events[-1] == "stopped"
    for r in records:
        assert {"timestamp", "level", "event"} <= r.keys()
    assert api.calls["version"] >= 1
