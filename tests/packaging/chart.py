"""Rendering the chart with the real Helm (``tools.helm``) and reading what it produced, for the tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import yaml

from controller_manager.api.resources import for_kind
from controller_manager.sim.apiserver.defaults import apply_defaults
from controller_manager.sim.apiserver.validation import validate as sim_validate
from tools.helm import run_helm
from tools.render_deploy import CHART, NAMESPACE, RELEASE

# The oldest Kubernetes the chart declares (Chart.yaml kubeVersion) and the newest kubernetes-validate knows.
SCHEMA_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())


def controller_keys() -> list[str]:
    """The controllers the chart offers (its values.yaml); test_generated checks they are the implemented ones."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    return sorted(values["controllers"])


def render(values: Mapping[str, Any] | None = None, *, namespace: str = NAMESPACE, release: str = RELEASE,
           chart: Path = CHART) -> list[dict[str, Any]]:
    """``helm template`` with ``values`` (given as a values file) -> the rendered objects, in order."""
    args = ["template", release, str(chart), "--namespace", namespace]
    if values:
        args += ["--values", "-"]
    done = run_helm(*args, stdin=json.dumps(values) if values else None)
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_error(values: Mapping[str, Any]) -> str:
    """The error Helm prints when it refuses ``values`` (the test fails if Helm accepts them)."""
    done = run_helm("template", RELEASE, str(CHART), "--values", "-", stdin=json.dumps(values), check=False)
    assert done.returncode != 0, f"helm accepted {values!r}"
    return done.stderr


def notes(values: Mapping[str, Any] | None = None, namespace: str = NAMESPACE) -> str:
    """NOTES.txt as ``helm install`` prints it (a client-side dry run: no cluster involved)."""
    done = run_helm("install", RELEASE, str(CHART), "--namespace", namespace, "--dry-run=client",
                    "--values", "-", stdin=json.dumps(values or {}))
    return done.stdout.split("NOTES:\n", 1)[1]


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for obj in objs:
        assert obj["kind"] not in out, f"two {obj['kind']} objects rendered"
        out[obj["kind"]] = obj
    return out


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Strict validation against the Kubernetes OpenAPI schemas, for each version in SCHEMA_VERSIONS."""
    errors = []
    for version in SCHEMA_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{version} {obj['kind']}: {exc.message} at {list(exc.path)}")
    return errors


def sim_errors(obj: dict[str, Any]) -> list[str]:
    """kube-sim's apiserver validation (after its defaulting) for the kinds it serves; [] for the others."""
    resource = for_kind(obj["apiVersion"], obj["kind"])
    if resource is None:
        return []
    defaulted = apply_defaults(resource, obj)
    return [f"{obj['kind']}: {e}" for e in sim_validate(resource, defaulted, None)]


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = by_kind(objs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result
