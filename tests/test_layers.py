"""The import-linter contracts cover every controller package (a new one must be listed to be checked)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_controller_package_is_in_the_independence_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    independence = next(c for c in contracts if c["type"] == "independence")
    packages = sorted(
        f"controller_manager.controllers.{p.name}"
        for p in (ROOT / "controller_manager" / "controllers").iterdir()
        if (p / "__init__.py").exists()
    )
    assert sorted(independence["modules"]) == packages
