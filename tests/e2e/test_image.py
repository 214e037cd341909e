"""The image built from the Dockerfile (``tools.image``: buildah, a base built here from Debian packages through
``PYTHON_IMAGE``) and run with podman against kube-sim as the chart runs it: as uid 65532 on a read-only root
filesystem with only /tmp writable, the entrypoint serving /healthz and leading; and a size kept in check."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from tests.e2e.conftest import Https, KubeSim, Manager, Processes, free_port, wait_until
from tools.image import BASE, IMAGE, build, inspect, podman_run

pytestmark = [pytest.mark.e2e, pytest.mark.image, pytest.mark.xdist_group("e2e"), pytest.mark.timeout(3600)]

# What the Dockerfile adds to its base (the project and its dependencies, installed; pip removed). The base here
# is Debian minbase + python3 (about 360 MiB); on python:3.12-slim (about 120 MiB) the total stays near 250 MiB.
MAX_ADDED = 200 * 2**20


@pytest.fixture(scope="module")
def image() -> str:
    build(IMAGE)
    return IMAGE


def test_image_metadata(image: str) -> None:
    meta = inspect(image)
    config = meta["Config"]
    assert isinstance(config, dict)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["controller-manager"]
    assert "10257/tcp" in config["ExposedPorts"]
    assert config["Labels"]["org.opencontainers.image.title"] == "controller-manager"
    size, base = meta["Size"], inspect(BASE)["Size"]
    assert isinstance(size, int)
    assert isinstance(base, int)
    assert 0 < size - base < MAX_ADDED, f"the Dockerfile adds {(size - base) / 2**20:.0f} MiB to its base"
    # Nothing of the build is left: no pip, no wheels.
    out = subprocess.run(podman_run("--rm", "--network=none", "--entrypoint", "sh", image, "-c",
                                    "id -u; id -g; command -v pip || echo no-pip; ls /wheels 2>&1 || true"),
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out[:3] == ["65532", "65532", "no-pip"]
    assert "No such file or directory" in " ".join(out[3:])


async def test_image_runs_read_only_and_serves_healthz(
        image: str, processes: Processes, sim: KubeSim, https: Https) -> None:
    kubeconfig = processes.directory / "container.kubeconfig"
    kubeconfig.write_text(sim.kubeconfig.read_text())
    kubeconfig.chmod(0o644)  # read by uid 65532 inside
    port = free_port()
    process = await processes.spawn("container", *podman_run(
        "--rm", "--network=host", "--read-only", "--tmpfs", "/tmp:size=64m", "--cap-drop=ALL",
        "--security-opt=no-new-privileges", "--name", f"cm-e2e-{port}",
        "-v", f"{kubeconfig}:/etc/kubernetes/kubeconfig:ro", image,
        "--kubeconfig=/etc/kubernetes/kubeconfig", f"--secure-port={port}", "--bind-address=127.0.0.1",
        "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=0.5s"))
    manager = Manager(process, port)
    await https.wait_serving(manager, timeout=90)
    await https.wait_role(manager, "leader", timeout=60)
    assert await https.get(manager, "/livez") == (200, "ok")

    async def inside() -> list[str] | None:
        done = await asyncio.create_subprocess_exec(
            "podman", "exec", f"cm-e2e-{port}", "sh", "-c", "id -u; touch /probe 2>&1; touch /tmp/probe && echo tmp-ok",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await done.communicate()
        return out.decode().splitlines() if done.returncode == 0 else None

    lines = await wait_until(inside, what="podman exec into the container")
    assert lines[0] == "65532"
    assert "Read-only file system" in lines[1]
    assert lines[2] == "tmp-ok"
    records = [json.loads(line) for line in process.text().splitlines() if line.startswith("{")]
    assert any(r.get("event") == "waiting to acquire the lease" for r in records)
    assert await process.stop() == 0
