"""Custom resources end to end: a CRD applied with kubectl, its objects created, listed (with the CRD's
printer columns) and deleted with kubectl, and the daemon's garbage collector and namespace controller
finding them through discovery: a CronTab owned by a Deployment goes with it, a namespace holding
CronTabs is emptied and deleted, and deleting the CRD deletes its remaining objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

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
"""
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: owner}
spec:
  replicas: 1
  selector: {matchLabels: {app: owner}}
  template:
    metadata: {labels: {app: owner}}
    spec: {containers: [{name: c, image: nginx}]}
"""


def crontab(name: str, namespace: str, owner_uid: str | None = None) -> str:
    meta: dict[str, object] = {"name": name, "namespace": namespace}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "owner",
                                    "uid": owner_uid}]
    return json.dumps({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": meta,
                       "spec": {"cronSpec": "*/5 * * * *"}})


async def gone(kubectl: Kubectl, *args: str) -> bool | None:
    code, out = await kubectl("get", *args)
    return True if code != 0 and "NotFound" in out else None


async def test_custom_resources_with_kubectl_gc_and_namespaces(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    def manifest(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    out = await kubectl.ok("apply", "-f", manifest("crd.yaml", CRD))
    assert out.strip() == "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"
    await kubectl.ok("wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=10s")
    # The collector discovers resources at start-up (and every 30s after): the CRD is there by then.
    await start_manager(processes, sim)

    await kubectl.ok("apply", "-f", manifest("deploy.yaml", DEPLOYMENT))
    uid = await kubectl.ok("get", "deployment", "owner", "-o", "jsonpath={.metadata.uid}")
    out = await kubectl.ok("apply", "-f", manifest("owned.json", crontab("owned", "default", uid)))
    assert out.strip() == "crontab.stable.example.com/owned created"
    listed = await kubectl.ok("get", "ct")
    assert listed.split("\n")[0].split() == ["NAME", "SPEC", "REPLICAS"]
    assert listed.split("\n")[1].split() == ["owned", "*/5", "*", "*", "*", "*", "1"]

    await kubectl.ok("delete", "deployment", "owner", "--wait=false")
    await wait_until(lambda: gone(kubectl, "crontab", "owned"), timeout=60)

    await kubectl.ok("create", "namespace", "team")
    await kubectl.ok("apply", "-f", manifest("team.json", crontab("in-team", "team")))
    await kubectl.ok("delete", "namespace", "team", "--wait=false")
    await wait_until(lambda: gone(kubectl, "namespace", "team"), timeout=60)

    await kubectl.ok("apply", "-f", manifest("left.json", crontab("left", "default")))
    out = await kubectl.ok("delete", "crd", "crontabs.stable.example.com", "--timeout=30s")
    assert out.strip() == 'customresourcedefinition.apiextensions.k8s.io "crontabs.stable.example.com" deleted'
    # kubectl's discovery cache still maps the name, so the list itself is the 404 (as on a real cluster).
    code, out = await kubectl("get", "crontabs")
    assert code != 0
    assert "the server could not find the requested resource" in out
    code, out = await kubectl("get", "crontabs", "--cache-dir", str(tmp_path / "fresh-cache"))
    assert code != 0
    assert 'the server doesn\'t have a resource type "crontabs"' in out
