"""The real kubectl reading kube-sim's OpenAPI: ``kubectl explain`` (v3, and v2 through its protobuf client),
and server-side field validation still reporting unknown fields."""

from __future__ import annotations

import asyncio

from tests.sim.apiserver.test_kubectl import Kubectl, kubectl

__all__ = ["kubectl"]

BAD_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  bogus: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
"""


def _fields(out: str) -> dict[str, str]:
    """explain's FIELDS section: field name -> its type and flags (``<integer>``, ``<LabelSelector> -required-``)."""
    fields: dict[str, str] = {}
    in_fields = False
    for line in out.splitlines():
        if line.strip() == "FIELDS:":
            in_fields = True
            continue
        if in_fields and line.startswith(("  ", "   ")) and "\t" in line and not line.startswith("    "):
            name, _, rest = line.strip().partition("\t")
            fields[name] = rest.strip()
    return fields


async def test_explain_deployment_spec(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "deployment.spec")
    assert out.splitlines()[:3] == ["GROUP:      apps", "KIND:       Deployment", "VERSION:    v1"]
    assert "FIELD: spec <DeploymentSpec>" in out
    assert _fields(out) == {
        "minReadySeconds": "<integer>", "paused": "<boolean>", "progressDeadlineSeconds": "<integer>",
        "replicas": "<integer>", "revisionHistoryLimit": "<integer>", "selector": "<LabelSelector> -required-",
        "strategy": "<DeploymentStrategy>", "template": "<PodTemplateSpec> -required-"}


async def test_explain_containers_recursive(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "pod.spec.containers", "--recursive")
    assert "FIELD: containers <[]Container>" in out
    lines = [line.rstrip() for line in out.splitlines()]
    for expected in ("  name\t<string> -required-", "  image\t<string>", "  env\t<[]EnvVar>",
                     "    name\t<string> -required-", "  ports\t<[]ContainerPort>",
                     "    containerPort\t<integer> -required-", "    protocol\t<string>",
                     "  resources\t<ResourceRequirements>", "    limits\t<map[string]Quantity>",
                     "  imagePullPolicy\t<string>"):
        assert expected in lines, expected
    enum = await kubectl("explain", "pod.spec.containers.imagePullPolicy")
    assert "ENUM:\n    Always\n    IfNotPresent\n    Never" in enum


async def test_explain_with_api_version(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "deployment", "--api-version=apps/v1")
    assert out.splitlines()[:3] == ["GROUP:      apps", "KIND:       Deployment", "VERSION:    v1"]
    assert _fields(out) == {"apiVersion": "<string>", "kind": "<string>", "metadata": "<ObjectMeta>",
                            "spec": "<DeploymentSpec> -required-", "status": "<DeploymentStatus>"}
    surge = await kubectl("explain", "deployment.spec.strategy.rollingUpdate.maxSurge")
    assert "FIELD: maxSurge <IntOrString>" in surge


async def test_explain_plaintext_openapiv2(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "--output=plaintext-openapiv2", "deployment.spec")
    assert out.splitlines()[:2] == ["KIND:     Deployment", "VERSION:  apps/v1"]
    assert "RESOURCE: spec <Object>" in out
    fields = {line.split("\t")[0].strip(): line.split("\t")[1].strip()
              for line in out.splitlines() if line.startswith("   ") and "\t" in line}
    assert fields == {"minReadySeconds": "<integer>", "paused": "<boolean>", "progressDeadlineSeconds": "<integer>",
                      "replicas": "<integer>", "revisionHistoryLimit": "<integer>",
                      "selector": "<Object> -required-", "strategy": "<Object>", "template": "<Object> -required-"}


async def test_create_with_unknown_field_reports_the_servers_strict_error(kubectl: Kubectl) -> None:
    proc = await asyncio.create_subprocess_exec(*kubectl.base, "create", "-f", "-", stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(BAD_DEPLOYMENT.encode()), 30)
    assert proc.returncode == 1
    assert err.decode().strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Deployment in version "v1" cannot be handled '
        'as a Deployment: strict decoding error: unknown field "spec.bogus"')


APPLIED = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - {{name: a, image: nginx, env: [{{name: XX, value: "{x}"}}, {{name: YY, value: "1"}}]}}
      - {{name: b, image: busybox}}
"""


async def test_apply_merges_lists_by_the_published_merge_keys(kubectl: Kubectl) -> None:
    """kubectl apply computes its strategic merge patch from the OpenAPI schemas' patch strategies and merge
    keys: an env entry another client added stays, the applied one changes."""
    await kubectl("apply", "-f", "-", stdin=APPLIED.format(x="1"))
    await kubectl("set", "env", "deploy/web", "-c", "a", "ZZ=3")
    assert "configured" in await kubectl("apply", "-f", "-", stdin=APPLIED.format(x="2"))
    env = await kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].env}")
    assert env == '[{"name":"XX","value":"2"},{"name":"YY","value":"1"},{"name":"ZZ","value":"3"}]'


async def test_explain_custom_resource_definition(kubectl: Kubectl) -> None:
    """The CRD kind is in the OpenAPI documents as the built-in kinds are (generated from apiextensions/v1)."""
    out = await kubectl("explain", "crd.spec")
    assert out.splitlines()[:3] == ["GROUP:      apiextensions.k8s.io", "KIND:       CustomResourceDefinition",
                                    "VERSION:    v1"]
    assert "FIELD: spec <CustomResourceDefinitionSpec>" in out
    assert _fields(out) == {
        "conversion": "<CustomResourceConversion>", "group": "<string> -required-",
        "names": "<CustomResourceDefinitionNames> -required-", "preserveUnknownFields": "<boolean>",
        "scope": "<string> -required-", "versions": "<[]CustomResourceDefinitionVersion> -required-"}
    schema = await kubectl("explain", "customresourcedefinitions.spec.versions.schema.openAPIV3Schema")
    fields = _fields(schema)
    assert fields["properties"] == "<map[string]JSONSchemaProps>"
    assert fields["x-kubernetes-validations"] == "<[]ValidationRule>"
    assert fields["maximum"] == "<number>"
    rule = _fields(await kubectl("explain", "crd.spec.versions.schema.openAPIV3Schema.x-kubernetes-validations"))
    assert rule["rule"] == "<string> -required-"
    assert rule["reason"] == "<string>"
