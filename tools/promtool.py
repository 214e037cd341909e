"""A real ``promtool`` (Prometheus' rule checker and unit-test runner), for testing the chart's alerts.

Guarantees:
- :func:`promtool_binary` returns the path of a working promtool: ``$PROMTOOL`` when set, else one on
  ``PATH``, else a copy cached under the running interpreter's prefix (the project's ``.venv``, so
  ``make clean`` removes it), fetched on first use.
- The fetch uses only a package registry through its ordinary client: ``apt-get download prometheus``
  (Debian's package, which ships ``/usr/bin/promtool``) into a temporary folder, unpacked with
  ``dpkg-deb -x``; nothing is installed system-wide. The extracted binary must answer ``--version`` as
  promtool 2.x, else :class:`PromtoolUnavailable` says why.
- Concurrent callers (pytest-xdist workers) are serialised by a file lock; a half-written binary is never
  visible (written to a temporary name, then renamed).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tools.helm import cache_dir

PACKAGE = "prometheus"
_MEMBER = Path("usr/bin/promtool")
_VERSION = re.compile(r"^promtool, version (2\.\d+\.\d+)", re.MULTILINE)


class PromtoolUnavailable(RuntimeError):
    """No promtool could be found or fetched; the message says why."""


def promtool_version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False, timeout=30)
    match = _VERSION.search(done.stdout + done.stderr)
    if done.returncode != 0 or match is None:
        raise PromtoolUnavailable(f"{binary} --version: exit {done.returncode}: {(done.stdout + done.stderr)[:200]}")
    return match.group(1)


def promtool_binary() -> Path:
    """Path to a promtool executable, fetching Debian's once if none is at hand."""
    override = os.environ.get("PROMTOOL")
    if override:
        return Path(override)
    found = shutil.which("promtool")
    if found:
        return Path(found)
    target = cache_dir() / "promtool" / "promtool"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target.is_file() and os.access(target, os.X_OK)):
            _install(target)
    return target


def _install(target: Path) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise PromtoolUnavailable("no promtool on PATH and no apt-get/dpkg-deb to fetch Debian's prometheus package")
    with tempfile.TemporaryDirectory(prefix="promtool-fetch-") as tmp:
        done = _download(tmp)
        if done.returncode != 0 and os.geteuid() == 0:
            # A fresh machine may have no package lists yet (apt-get download then finds nothing): as root,
            # fetch them once and try again.
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False, timeout=600)
            done = _download(tmp)
        debs = list(Path(tmp).glob(f"{PACKAGE}_*.deb"))
        if done.returncode != 0 or len(debs) != 1:
            raise PromtoolUnavailable(f"apt-get download {PACKAGE} failed (run apt-get update first?): "
                                      f"{done.stderr.strip()}")
        root = Path(tmp) / "root"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(root)], check=True, capture_output=True, timeout=300)
        extracted = root / _MEMBER
        if not extracted.is_file():
            raise PromtoolUnavailable(f"{debs[0].name} holds no {_MEMBER}")
        partial = target.with_name(f".promtool.{os.getpid()}")
        shutil.copyfile(extracted, partial)
        partial.chmod(0o755)
        promtool_version(partial)
        partial.replace(target)


def _download(folder: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["apt-get", "download", PACKAGE], cwd=folder, capture_output=True, text=True, check=False,
                          timeout=300)


def run_promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool (never raises on its exit code: the caller reads it with the output)."""
    return subprocess.run([str(promtool_binary()), *args], capture_output=True, text=True, cwd=cwd, check=False,
                          timeout=120)


if __name__ == "__main__":
    print(promtool_binary())
