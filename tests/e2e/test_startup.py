"""The installed ``controller-manager`` command refusing to start: one clear error line, a non-zero exit,
never a traceback; and ``--help`` naming kube-controller-manager's flags."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import CONTROLLER_MANAGER, free_port

# Light on CPU: may run beside one of the heavy e2e tests (the "e2e" group), never beside another light one.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

# Flags kube-controller-manager has, under the same names, that this daemon implements.
UPSTREAM_FLAGS = (
    "--kubeconfig", "--master", "--controllers", "--kube-api-qps", "--kube-api-burst", "--min-resync-period",
    "--leader-elect", "--leader-elect-lease-duration", "--leader-elect-renew-deadline",
    "--leader-elect-retry-period", "--leader-elect-resource-lock", "--leader-elect-resource-name",
    "--leader-elect-resource-namespace", "--secure-port", "--bind-address", "--tls-cert-file",
    "--tls-private-key-file", "--authorization-always-allow-paths", "--concurrent-deployment-syncs",
    "--concurrent-replicaset-syncs", "--concurrent-daemonset-syncs", "--concurrent-job-syncs",
    "--concurrent-cron-job-syncs", "--concurrent-gc-syncs", "--enable-garbage-collector",
    "--concurrent-namespace-syncs", "--namespace-sync-period", "--concurrent-ttl-after-finished-syncs",
    "--node-monitor-period", "--node-monitor-grace-period", "--node-startup-grace-period", "--node-eviction-rate",
    "--secondary-node-eviction-rate", "--large-cluster-size-threshold", "--unhealthy-zone-threshold",
    "--terminated-pod-gc-threshold", "--concurrent-resource-quota-syncs", "--resource-quota-sync-period", "--v",
)


async def run(*args: str, cwd: Path, timeout: float = 60.0) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(cwd)  # no ~/.kube/config to fall back on
    proc = await asyncio.create_subprocess_exec(CONTROLLER_MANAGER, *args, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                cwd=cwd, env=env)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"controller-manager {' '.join(args)} still running after {timeout}s") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def error_lines(stderr: str) -> list[str]:
    """Lines that report an error: a flag error's ``Error: ...`` or a JSON log line at level error."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("Error: "):
            found.append(line)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("level") == "error":
            found.append(str(record["event"]))
    return found


def unreachable_kubeconfig(directory: Path) -> tuple[Path, int]:
    """A kubeconfig naming a port nothing listens on."""
    port = free_port()
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
        "current-context": "gone",
    }))
    return kubeconfig, port


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param(["--no-such-flag"], "Error: unrecognized arguments: --no-such-flag", id="unknown-flag"),
        pytest.param(["--controllers=deployment,bogus"], 'Error: "bogus" is not in the list of known controllers',
                     id="unknown-controller"),
    ],
)
async def test_a_bad_flag_is_one_error_line(tmp_path: Path, args: list[str], error: str) -> None:
    # One flag error and one controller-name error as processes; tests/manager/test_main.py has every case
    # in-process (the same main(), without a Python start-up each).
    # Flags are checked before any connection: the unreachable server is never what stops it.
    kubeconfig, _ = unreachable_kubeconfig(tmp_path)
    code, out, err = await run(f"--kubeconfig={kubeconfig}", "--secure-port=0", *args, cwd=tmp_path)
    assert code == 1
    assert out == ""
    assert err.splitlines() == [error]


async def test_an_unreachable_api_server_is_one_error_line(tmp_path: Path) -> None:
    kubeconfig, port = unreachable_kubeconfig(tmp_path)
    secure_port = free_port()
    code, out, err = await run(f"--kubeconfig={kubeconfig}", f"--secure-port={secure_port}",
                               "--bind-address=127.0.0.1", cwd=tmp_path)
    assert code == 1
    assert out == ""
    assert "Traceback" not in err
    assert error_lines(err) == [f"cannot reach the API server at http://127.0.0.1:{port}: Connection refused"]


async def test_a_missing_kubeconfig_is_one_error_line(tmp_path: Path) -> None:
    code, _, err = await run(f"--kubeconfig={tmp_path / 'absent'}", "--secure-port=0", "--log-format=text",
                             cwd=tmp_path)
    assert code == 1
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if re.search(r"\berror\b", line, re.IGNORECASE)]
    assert len(errors) == 1, err
    assert "invalid configuration" in errors[0]


def help_entries(text: str) -> dict[str, str]:
    """Each flag's help entry (wrapped lines joined) from ``--help``'s option listing, by long flag name."""
    entries: dict[str, str] = {}
    current = None
    for line in text[text.index("\noptions:"):].splitlines():
        match = re.match(r"^  (?:-\w(?: \w+)?, )?(--[a-z0-9-]+)", line)
        if match:
            current = match.group(1)
            entries[current] = line.strip()
        elif current is not None and line.startswith("   "):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


async def test_help_lists_kube_controller_managers_flags(tmp_path: Path) -> None:
    code, out, err = await run("--help", cwd=tmp_path)
    assert code == 0
    assert err == ""
    entries = help_entries(out)
    assert set(UPSTREAM_FLAGS) <= entries.keys(), sorted(set(UPSTREAM_FLAGS) - entries.keys())
    # Defaults are kube-controller-manager's, and shown.
    for flag, default in (("--leader-elect", "true"), ("--leader-elect-lease-duration", "15s"),
                          ("--leader-elect-renew-deadline", "10s"), ("--leader-elect-retry-period", "2s"),
                          ("--leader-elect-resource-namespace", "kube-system"), ("--secure-port", "10257"),
                          ("--bind-address", "0.0.0.0"), ("--kube-api-qps", "20"), ("--kube-api-burst", "30"),
                          ("--authorization-always-allow-paths", "/healthz,/readyz,/livez"),
                          ("--concurrent-deployment-syncs", "5"), ("--node-monitor-grace-period", "50s")):
        assert entries[flag].endswith(f"(default: {default})"), entries[flag]
    assert "deployment-controller" in entries["--controllers"]  # the help names the controllers
