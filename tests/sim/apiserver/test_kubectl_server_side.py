"""Real kubectl 1.37 doing server-side apply against kube-sim: apply twice, conflicts, --force-conflicts,
diff --server-side, --show-managed-fields, and the move from client-side apply."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from .test_kubectl import DEPLOYMENT, Kubectl, kubectl  # noqa: F401  (the fixture)


async def _run(k: Kubectl, *args: str) -> tuple[int, str, str]:
    proc = await k.start(*args)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _managers(doc: str) -> dict[str, dict[str, object]]:
    obj = yaml.safe_load(doc)
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


async def test_apply_server_side_twice(kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(DEPLOYMENT.format(replicas=2))
    assert "deployment.apps/web serverside-applied" in await kubectl("apply", "--server-side", "-f", str(manifest))
    rv = await kubectl("get", "deploy", "web", "-o", "jsonpath={.metadata.resourceVersion}")
    assert "deployment.apps/web serverside-applied" in await kubectl("apply", "--server-side", "-f", str(manifest))
    assert await kubectl("get", "deploy", "web", "-o", "jsonpath={.metadata.resourceVersion}") == rv
    shown = await kubectl("get", "deploy", "web", "--show-managed-fields", "-o", "yaml")
    entry = _managers(shown)["kubectl"]
    assert entry["operation"] == "Apply"
    assert entry["apiVersion"] == "apps/v1"
    assert set(entry["fieldsV1"]["f:spec"]) == {"f:replicas", "f:selector", "f:template"}  # type: ignore[index]
    assert "managedFields" not in await kubectl("get", "deploy", "web", "-o", "yaml")


async def test_conflict_and_force(kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(DEPLOYMENT.format(replicas=2))
    await kubectl("apply", "--server-side", "--field-manager=team-a", "-f", str(manifest))
    manifest.write_text(DEPLOYMENT.format(replicas=4))
    code, out, err = await _run(kubectl, "apply", "--server-side", "-f", str(manifest))
    assert code == 1, (out, err)
    assert err.startswith('error: Apply failed with 1 conflict: conflict with "team-a": .spec.replicas\n'), err
    code, out, err = await _run(kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    assert code == 0, err
    assert await kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}") == "4"
    managers = _managers(await kubectl("get", "deploy", "web", "--show-managed-fields", "-o", "yaml"))
    assert "f:replicas" in managers["kubectl"]["fieldsV1"]["f:spec"]  # type: ignore[index]
    assert "f:replicas" not in managers["team-a"]["fieldsV1"]["f:spec"]  # type: ignore[index]


async def test_diff_server_side(kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(DEPLOYMENT.format(replicas=2))
    await kubectl("apply", "--server-side", "-f", str(manifest))
    code, out, err = await _run(kubectl, "diff", "--server-side", "-f", str(manifest))
    assert (code, out) == (0, ""), err
    manifest.write_text(DEPLOYMENT.format(replicas=5))
    code, out, err = await _run(kubectl, "diff", "--server-side", "-f", str(manifest))
    assert code == 1, err
    assert "-  replicas: 2" in out
    assert "+  replicas: 5" in out
    assert await kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}") == "2"


async def test_from_client_side_apply(kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(DEPLOYMENT.format(replicas=2))
    await kubectl("apply", "-f", str(manifest))
    managers = _managers(await kubectl("get", "deploy", "web", "--show-managed-fields", "-o", "yaml"))
    assert set(managers) == {"kubectl-client-side-apply"}
    # The fields the last-applied configuration still describes move to kubectl without a conflict...
    manifest.write_text(DEPLOYMENT.format(replicas=3))
    assert "serverside-applied" in await kubectl("apply", "--server-side", "-f", str(manifest))
    assert await kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}") == "3"
    # ...and the annotation follows what was applied.
    last = await kubectl("get", "deploy", "web", "-o",
                         "jsonpath={.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}")
    assert '"replicas":3' in last
    # A field changed since by someone else conflicts.
    await kubectl("scale", "deploy", "web", "--replicas=7")
    manifest.write_text(DEPLOYMENT.format(replicas=4))
    code, _, err = await _run(kubectl, "apply", "--server-side", "-f", str(manifest))
    assert code == 1
    assert 'conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas\n' in err, err


async def test_kubectl_create_and_scale_are_recorded(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("create", "deployment", "web", "--image=nginx")  # sent as protobuf
    await kubectl("scale", "deployment", "web", "--replicas=3")
    managers = yaml.safe_load(await kubectl("get", "deploy", "web", "--show-managed-fields", "-o", "yaml"))
    entries = {(e["manager"], e["operation"], e.get("subresource", "")): e
               for e in managers["metadata"]["managedFields"]}
    assert set(entries) == {("kubectl-create", "Update", ""), ("kubectl", "Update", "scale")}
    created = entries[("kubectl-create", "Update", "")]["fieldsV1"]
    assert created["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert "f:replicas" not in created["f:spec"]
    assert entries[("kubectl", "Update", "scale")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
