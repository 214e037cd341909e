"""The real kubectl against custom resources in an in-process kube-sim: apply (client- and server-side,
twice), get with printer columns, scale, patch, delete of the CRD, and server-side apply to a custom
resource's /scale."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import yaml

from tests.sim.apiserver.test_kubectl import Kubectl, kubectl

__all__ = ["kubectl"]

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              replicas: {type: integer, default: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
"""


def crontab(name: str, replicas: int) -> str:
    return f"""apiVersion: stable.example.com/v1
kind: CronTab
metadata: {{name: {name}}}
spec: {{cronSpec: "*/5 * * * *", replicas: {replicas}}}
"""


async def test_apply_twice_get_scale_and_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(CRD)
    assert "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created" in \
        await kubectl("apply", "-f", str(crd_file))
    crd_file.write_text(CRD.replace("shortNames: [ct]", "shortNames: [ct, cts]"))
    assert "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com configured" in \
        await kubectl("apply", "-f", str(crd_file))
    cr = tmp_path / "cr.yaml"
    cr.write_text(crontab("a", replicas=2))
    assert "crontab.stable.example.com/a created" in await kubectl("apply", "-f", str(cr))
    cr.write_text(crontab("a", replicas=3))
    assert "crontab.stable.example.com/a configured" in await kubectl("apply", "-f", str(cr))
    assert await kubectl("get", "cts", "a", "-o", "jsonpath={.spec.replicas}") == "3"
    cr.write_text(crontab("b", replicas=1))
    assert "crontab.stable.example.com/b serverside-applied" in await kubectl("apply", "--server-side", "-f",
                                                                             str(cr))
    cr.write_text(crontab("b", replicas=4))
    assert "crontab.stable.example.com/b serverside-applied" in await kubectl("apply", "--server-side", "-f",
                                                                             str(cr))
    assert await kubectl("get", "ct", "b", "-o", "jsonpath={.spec.replicas}") == "4"
    assert "crontab.stable.example.com/a scaled" in await kubectl("scale", "crontab", "a", "--replicas=5")
    await kubectl("patch", "crontab", "a", "--type=merge", "-p", '{"spec":{"cronSpec":"1 * * * *"}}')
    lines = (await kubectl("get", "crontabs")).splitlines()
    assert lines[0].split() == ["NAME", "SPEC", "REPLICAS"]
    assert lines[1].split() == ["a", "1", "*", "*", "*", "*", "5"]
    crds = (await kubectl("get", "crd")).splitlines()
    assert crds[0].split() == ["NAME", "CREATED", "AT"]
    assert crds[1].split()[0] == "crontabs.stable.example.com"
    assert "deleted" in await kubectl("delete", "crd", "crontabs.stable.example.com")


async def test_explain(kubectl: Kubectl, tmp_path: Path) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(CRD.replace("cronSpec: {type: string}",
                                    "cronSpec: {type: string, description: When the job runs.}"))
    await kubectl("apply", "-f", str(crd_file))
    out = await kubectl("explain", "crontabs.spec")
    assert "GROUP:      stable.example.com" in out
    assert "KIND:       CronTab" in out
    assert "cronSpec\t<string>" in out
    assert "When the job runs." in out
    out = await kubectl("explain", "crontab.spec.cronSpec")
    assert "FIELD: cronSpec <string>" in out


async def _fails(kubectl: Kubectl, *args: str) -> str:
    proc = await kubectl.start(*args)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode != 0, f"kubectl {' '.join(args)} succeeded"
    return err.decode()


async def test_validation_rules_as_kubectl_reports_them(kubectl: Kubectl, tmp_path: Path) -> None:
    """x-kubernetes-validations: a CR breaking a rule, an update breaking a transition rule, and a CRD whose
    rule does not compile, each refused with the error kubectl prints for a real cluster's 422."""
    with_rules = CRD.replace(
        "              replicas: {type: integer, default: 1}\n",
        "              replicas: {type: integer, default: 1}\n"
        "            x-kubernetes-validations:\n"
        "            - {rule: \"self.replicas <= 5\", message: \"at most 5 replicas\", fieldPath: .replicas}\n"
        "            - {rule: \"self.cronSpec == oldSelf.cronSpec\", message: \"cronSpec is immutable\"}\n")
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(with_rules)
    await kubectl("apply", "-f", str(crd_file))
    cr = tmp_path / "cr.yaml"
    cr.write_text(crontab("big", 7))
    err = await _fails(kubectl, "apply", "-f", str(cr))
    assert 'The CronTab "big" is invalid: spec.replicas: Invalid value: at most 5 replicas' in err, err
    cr.write_text(crontab("ok", 2))
    assert "crontab.stable.example.com/ok created" in await kubectl("apply", "-f", str(cr))
    cr.write_text(crontab("ok", 3).replace("*/5 * * * *", "*/10 * * * *"))
    err = await _fails(kubectl, "apply", "-f", str(cr))
    assert 'The CronTab "ok" is invalid: spec: Invalid value: cronSpec is immutable' in err, err
    crd_file.write_text(with_rules.replace("self.replicas <= 5", "self.replicaz <= 5"))
    err = await _fails(kubectl, "apply", "-f", str(crd_file))
    assert "x-kubernetes-validations[0].rule: Invalid value:" in err, err
    assert "compilation failed: ERROR: <input>:1:5: undefined field 'replicaz'" in err, err


POOL_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pools.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      scale: {specReplicasPath: .spec.workers.count, statusReplicasPath: .status.workers}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              image: {type: string}
              workers: {type: object, properties: {count: {type: integer}}}
          status: {type: object, properties: {workers: {type: integer}}}
"""


def _pool(count: int) -> str:
    return f"""apiVersion: example.com/v1
kind: Pool
metadata: {{name: p}}
spec: {{image: nginx, workers: {{count: {count}}}}}
"""


def _server(kubectl: Kubectl) -> str:
    kubeconfig = Path(next(a for a in kubectl.base if a.startswith("--kubeconfig=")).split("=", 1)[1])
    server = re.search(r'server: "([^"]+)"', kubeconfig.read_text())
    assert server is not None
    return server[1]


async def _apply_scale(kubectl: Kubectl, replicas: int, manager: str, force: bool) -> tuple[int, dict[str, object]]:
    """PATCH application/apply-patch+yaml to the Pool's /scale (kubectl cannot send a Scale: it finds no
    resource for the kind), at the server kubectl's kubeconfig names."""
    server = _server(kubectl)
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "p"},
             "spec": {"replicas": replicas}}
    params = {"fieldManager": manager, **({"force": "true"} if force else {})}
    async with aiohttp.ClientSession() as session, session.patch(
            f"{server}/apis/example.com/v1/namespaces/default/pools/p/scale", data=yaml.safe_dump(scale),
            params=params, headers={"Content-Type": "application/apply-patch+yaml"}) as resp:
        return resp.status, await resp.json()


async def test_server_side_apply_to_a_custom_resources_scale(kubectl: Kubectl, tmp_path: Path) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(POOL_CRD)
    await kubectl("apply", "-f", str(crd_file))
    pool = tmp_path / "pool.yaml"
    pool.write_text(_pool(2))
    assert "pool.example.com/p serverside-applied" in await kubectl("apply", "--server-side", "-f", str(pool))
    # kubectl sends the Pool itself to /scale, which takes only a Scale (upstream's version check)
    err = await _fails(kubectl, "apply", "--server-side", "--subresource=scale", "-f", str(pool))
    assert "Error from server (BadRequest): invalid object type: example.com/v1, Kind=Pool" in err, err

    code, body = await _apply_scale(kubectl, 5, "autoscaler", force=False)
    assert code == 409, body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    code, body = await _apply_scale(kubectl, 5, "autoscaler", force=True)
    assert code == 200, body
    assert body["spec"] == {"replicas": 5}

    got = json.loads(await kubectl("get", "pool", "p", "-o", "json", "--show-managed-fields"))
    assert got["spec"]["workers"] == {"count": 5}
    entries = {e["manager"]: e for e in got["metadata"]["managedFields"]}
    assert set(entries) == {"kubectl", "autoscaler"}
    assert entries["autoscaler"]["fieldsV1"] == {"f:spec": {"f:workers": {"f:count": {}}}}
    assert (entries["autoscaler"]["operation"], entries["autoscaler"]["subresource"],
            entries["autoscaler"]["apiVersion"]) == ("Apply", "scale", "example.com/v1")
    assert entries["kubectl"]["fieldsV1"] == {"f:spec": {"f:image": {}}}
    assert await kubectl("get", "pool", "p", "--subresource=scale", "-o", "jsonpath={.spec.replicas}") == "5"

    # kubectl's own apply now meets the Scale's applier on the CR's replicas path
    err = await _fails(kubectl, "apply", "--server-side", "-f", str(pool))
    assert 'Apply failed with 1 conflict: conflict with "autoscaler" with subresource "scale": ' \
           ".spec.workers.count" in err, err
    assert "pool.example.com/p serverside-applied" in await kubectl("apply", "--server-side", "--force-conflicts",
                                                                    "-f", str(pool))
    got = json.loads(await kubectl("get", "pool", "p", "-o", "json", "--show-managed-fields"))
    assert got["spec"]["workers"] == {"count": 2}
    assert [e["manager"] for e in got["metadata"]["managedFields"]] == ["kubectl"]
