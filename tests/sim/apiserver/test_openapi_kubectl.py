"""The real kubectl reading kube-sim's OpenAPI: ``kubectl explain`` (v3, and v2 through its protobuf client)
with upstream's descriptions, and server-side field validation still reporting unknown fields."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.sim.apiserver.test_kubectl import Kubectl, kubectl
from tests.sim.apiserver.upstream_schema import definitions

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
    # the descriptions travel in the v2 protobuf document too
    spec = definitions()["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]["description"]
    own = definitions()["io.k8s.api.apps.v1.DeploymentSpec"]["description"]
    assert _words(_section(out, "DESCRIPTION")) == _words(f"{spec} {own}")


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


# --- descriptions, as upstream's documents give them -------------------------------------------------


def _section(out: str, title: str) -> str:
    """The text of one explain section (``DESCRIPTION:``), its lines joined."""
    lines = out.splitlines()
    start = lines.index(f"{title}:") + 1
    end = next((i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def _words(text: str) -> str:
    """Text with kubectl's wrapping undone: every run of whitespace one space."""
    return " ".join(text.split())


def _upstream_property(path: str) -> dict[str, Any]:
    """Upstream's schema of a dotted field path from a type (``io.k8s.api.apps.v1.Deployment.spec.strategy``)."""
    defs = definitions()
    type_name, *fields = path.split("/")[0], *path.split("/")[1].split(".")
    schema: dict[str, Any] = defs[type_name]
    for i, name in enumerate(fields):
        prop = schema["properties"][name]
        if i == len(fields) - 1:
            return prop  # type: ignore[no-any-return]
        target = prop.get("items", prop)
        schema = defs[target["$ref"].rsplit("/", 1)[-1]]
    return schema


async def test_explain_deployment_strategy_describes_as_upstream(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "deployment.spec.strategy")
    strategy = _upstream_property("io.k8s.api.apps.v1.Deployment/spec.strategy")
    own = definitions()["io.k8s.api.apps.v1.DeploymentStrategy"]["description"]
    # kubectl shows the field's description, then its type's
    assert _words(_section(out, "DESCRIPTION")) == _words(f"{strategy['description']} {own}")
    fields = _section(out, "FIELDS")
    rolling = _upstream_property("io.k8s.api.apps.v1.DeploymentStrategy/rollingUpdate")["description"]
    assert _words(rolling) in _words(fields)
    kind = _upstream_property("io.k8s.api.apps.v1.DeploymentStrategy/type")["description"]
    # a server with OpenAPIEnums on (the default) lists the values, each described by its constant's comment
    assert _words(f"{kind} Possible enum values: - `\"Recreate\"` ") in _words(fields)
    assert "  enum: Recreate, RollingUpdate" in fields.splitlines()
    enum = await kubectl("explain", "deployment.spec.strategy.type")
    assert "ENUM:\n    Recreate\n    RollingUpdate\n" in enum


async def test_explain_cronjob_schedule_describes_as_upstream(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "cronjob.spec.schedule")
    assert "FIELD: schedule <string>" in out
    schedule = _upstream_property("io.k8s.api.batch.v1.CronJob/spec.schedule")["description"]
    assert schedule
    assert _words(_section(out, "DESCRIPTION")) == _words(schedule)


def _tree(out: str) -> set[tuple[str, str]]:
    """explain --recursive's FIELDS tree as (dotted path, type and flags)."""
    found: set[tuple[str, str]] = set()
    stack: list[str] = []
    for line in out.splitlines()[out.splitlines().index("FIELDS:") + 1:]:
        if "\t" not in line:
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        name, _, rest = line.strip().partition("\t")
        del stack[depth:]
        stack.append(name)
        found.add((".".join(stack), rest.strip()))
    return found


def _type(s: dict[str, Any]) -> str | None:
    """A schema's type (the package writes ``["string", "null"]`` for a nullable one)."""
    t = s.get("type")
    return next(x for x in t if x != "null") if isinstance(t, list) else t


def _upstream_tree(type_name: str, prefix: str = "") -> set[tuple[str, str]]:
    """The same tree from upstream's definitions: every property, with kubectl's type names, into every
    referenced struct (lists of structs included)."""
    defs = definitions()
    schema = defs[type_name]
    out: set[tuple[str, str]] = set()
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        ref = prop.get("$ref") or prop.get("items", {}).get("$ref") or prop.get("additionalProperties", {}).get("$ref")
        target = ref.rsplit("/", 1)[-1] if ref else ""
        t = _type(prop)
        short = target.rsplit(".", 1)[-1]
        if t == "array":
            shown = f"[]{short or _type(prop['items'])}"
        elif t == "object" and "additionalProperties" in prop:
            shown = f"map[string]{short or _type(prop['additionalProperties'])}"
        elif target in ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"):
            shown = "string"  # kubectl names a date-time by its type
        else:
            shown = short or str(t)
        out.add((path, f"<{shown}>" + (" -required-" if name in required else "")))
        if target and defs.get(target, {}).get("properties") and t != "object":
            out |= _upstream_tree(target, f"{path}.")
    return out


async def test_explain_pods_recursive_as_upstream(kubectl: Kubectl) -> None:
    out = await kubectl("explain", "pods", "--recursive")
    assert out.splitlines()[:2] == ["KIND:       Pod", "VERSION:    v1"]
    assert _words(_section(out, "DESCRIPTION")) == _words(definitions()["io.k8s.api.core.v1.Pod"]["description"])
    ours, theirs = _tree(out), _upstream_tree("io.k8s.api.core.v1.Pod")
    assert len(theirs) > 500
    assert ours == theirs, (sorted(ours - theirs)[:10], sorted(theirs - ours)[:10])
