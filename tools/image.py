"""Build the project's image from its Dockerfile with Debian's ``buildah`` and run it with ``podman``, offline
from any container registry: the Dockerfile's ``PYTHON_IMAGE`` base is built here from Debian packages.

    python -m tools.image            # build localhost/controller-manager:dev, print its id and size

Guarantees:
- :func:`base_image` makes ``localhost/python-debian:bookworm`` once (kept in the local image store): a
  ``debootstrap --variant=minbase`` Debian bookworm root filesystem imported as an image, with Debian's
  ``python3`` in a virtual environment at ``/opt/python`` first on ``PATH`` (so ``python`` and a removable
  ``pip`` exist, as in the official ``python`` images). The machine's CA bundle is copied in and named by
  ``PIP_CERT``, so pip inside the build reaches PyPI the way this machine does.
- :func:`build` runs ``buildah bud`` on the repository's Dockerfile with that base (``--build-arg
  PYTHON_IMAGE``), chroot isolation and the host's network (the builder stage downloads the dependencies'
  wheels from PyPI): the Dockerfile itself is unchanged.
- :func:`podman_run` carries the ``podman run`` options this machine needs: the ``runc`` runtime (crun refuses
  hybrid cgroups here) and file/process limits no higher than this process's own (the container runtime may
  not raise them).
- Every tool is fetched from Debian's packages by :func:`ensure_tools` (``apt-get install``) when missing;
  :class:`ImageUnavailable` says what failed.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "localhost/python-debian:bookworm"
IMAGE = "localhost/controller-manager:dev"
PACKAGES = {"buildah": "buildah", "podman": "podman", "runc": "runc", "debootstrap": "debootstrap"}
RUNC = "/usr/sbin/runc"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")

_BASE_CONTAINERFILE = """\
FROM localhost/debian-minbase:bookworm
COPY host-ca.crt /etc/ssl/certs/host-ca.crt
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
    && rm -rf /var/lib/apt/lists/* \\
    && python3 -m venv /opt/python
ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_CERT=/etc/ssl/certs/host-ca.crt \\
    LANG=C.UTF-8
CMD ["python3"]
"""


class ImageUnavailable(RuntimeError):
    """A tool could not be installed or a build step failed; the message says which and why."""


def _run(*argv: str, timeout: float = 900, cwd: Path | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    if done.returncode != 0:
        raise ImageUnavailable(f"{' '.join(argv[:4])} ... exited {done.returncode}: {done.stderr[-3000:]}")
    return done.stdout


def ensure_tools() -> None:
    missing = [pkg for tool, pkg in PACKAGES.items()
               if shutil.which(tool) is None and not (tool == "runc" and Path(RUNC).exists())]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ImageUnavailable(f"missing {', '.join(missing)} and cannot apt-get install them")
    _run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, timeout=900)


def _exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0


def _limits() -> list[str]:
    """``--ulimit`` options no higher than this process's limits (raising them needs CAP_SYS_RESOURCE)."""
    out = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, _hard = resource.getrlimit(which)
        value = min(soft if soft != resource.RLIM_INFINITY else 65536, 65536) // 2
        out += ["--ulimit", f"{name}={value}:{value}"]
    return out


def base_image() -> str:
    ensure_tools()
    if _exists(BASE):
        return BASE
    with tempfile.TemporaryDirectory(prefix="image-base-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        if not _exists("localhost/debian-minbase:bookworm"):
            _run("debootstrap", "--variant=minbase", "bookworm", str(rootfs), "http://deb.debian.org/debian",
                 timeout=1800)
            _run("tar", "-C", str(rootfs), "-cf", f"{tmp}/rootfs.tar", ".")
            _run("podman", "import", f"{tmp}/rootfs.tar", "localhost/debian-minbase:bookworm")
        (Path(tmp) / "Containerfile").write_text(_BASE_CONTAINERFILE)
        shutil.copyfile(HOST_CA, Path(tmp) / "host-ca.crt")
        _run("buildah", "bud", "--isolation=chroot", "--network=host", *_limits(), "-t", BASE, "-f",
             "Containerfile", ".", cwd=Path(tmp), timeout=1800)
    return BASE


def build(tag: str = IMAGE) -> str:
    """Build the Dockerfile into ``tag``; its image id."""
    base = base_image()
    _run("buildah", "bud", "--isolation=chroot", "--network=host", *_limits(), "--build-arg",
         f"PYTHON_IMAGE={base}", "-t", tag, "-f", "Dockerfile", ".", cwd=ROOT, timeout=1800)
    return inspect(tag)["Id"]  # type: ignore[no-any-return]


def inspect(image: str) -> dict[str, object]:
    result: dict[str, object] = json.loads(_run("podman", "image", "inspect", image))[0]
    return result


def podman_run(*args: str) -> list[str]:
    """The ``podman run`` command line for ``args`` (options, image, then the entrypoint's arguments)."""
    return ["podman", "--runtime", RUNC, "run", *_limits(), *args]


if __name__ == "__main__":
    image_id = build()
    print(image_id, inspect(IMAGE)["Size"], file=sys.stdout)
