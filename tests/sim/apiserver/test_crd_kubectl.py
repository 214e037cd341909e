"""The real kubectl against custom resources in an in-process kube-sim: apply (client- and server-side,
twice), get with printer columns, scale, patch, and delete of the CRD."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
