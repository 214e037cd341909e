"""The image's entrypoint, run as the image runs it but without Docker: the build context .dockerignore
lets through is built into a wheel (``pip wheel --no-deps``, as the builder stage does), installed with its
dependencies into a clean virtual environment (as the runtime stage does), and ``controller-manager`` works
from there: ``--help`` exits 0, a bad flag exits 1 with one error line."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.packaging.test_dockerfile import build_context
from tools.render_deploy import ROOT

pytestmark = pytest.mark.e2e


def _run(*cmd: str | Path, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv holding only the project's wheel and its runtime dependencies; returns its bin/."""
    tmp = tmp_path_factory.mktemp("image")
    context = tmp / "context"
    for path in build_context():
        target = context / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    wheels = tmp / "wheels"
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", wheels, context)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("controller_manager-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    assert "controller_manager/manager/main.py" in names
    assert "controller_manager/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "tools/", "charts/"))]
    venv = tmp / "venv"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    done = _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", wheel)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def test_entrypoint_help_exits_zero(installed: Path) -> None:
    done = _run(installed / "controller-manager", "--help", cwd=installed.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: controller-manager")
    for flag in ("--controllers", "--leader-elect", "--secure-port", "--concurrent-deployment-syncs"):
        assert flag in done.stdout


def test_entrypoint_refuses_unknown_controllers(installed: Path) -> None:
    done = _run(installed / "controller-manager", "--controllers=*,-nosuch", cwd=installed.parent)
    assert done.returncode == 1
    assert done.stderr == 'Error: "nosuch" is not in the list of known controllers\n'


def test_installed_package_is_the_clean_venvs_own(installed: Path) -> None:
    done = _run(installed / "python", "-c", "import controller_manager; print(controller_manager.__file__)",
                cwd=installed.parent)  # not the repository: "-c" puts the working directory first on sys.path
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(installed.parent)
