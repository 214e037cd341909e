"""The OpenAPI definitions of custom resources, as upstream's ``pkg/controller/openapi/builder`` publishes a
CRD version's schema: named by the reversed group (``com.example.stable.v1.CronTab``), the CRD's
openAPIV3Schema with ``apiVersion``, ``kind`` and ``metadata`` (a reference to ObjectMeta) added, and a
``<Kind>List`` beside it; both carry their ``x-kubernetes-group-version-kind``."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.crd.resource import CustomResource

Obj = dict[str, Any]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
API_VERSION = {"type": "string", "description": (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
    f"{_CONVENTIONS}#resources")}
KIND = {"type": "string", "description": (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this from "
    "the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    f"{_CONVENTIONS}#types-kinds")}


def type_name(res: CustomResource, kind: str) -> str:
    reversed_group = ".".join(reversed(res.group.split(".")))
    return f"{reversed_group}.{res.version}.{kind}"


def _ref(name: str, version: int) -> str:
    return ("#/components/schemas/" if version == 3 else "#/definitions/") + name


def definitions(resources: Iterable[Resource], version: int) -> dict[str, Obj]:
    """The kind and list definitions of every custom resource among ``resources``."""
    out: dict[str, Obj] = {}
    for r in resources:
        if not isinstance(r, CustomResource):
            continue
        kind: Obj = copy.deepcopy(r.schema) if isinstance(r.schema, dict) else {"type": "object"}
        props = kind.setdefault("properties", {})
        props["apiVersion"] = dict(API_VERSION)
        props["kind"] = dict(KIND)
        props["metadata"] = {"$ref": _ref(_META + "ObjectMeta", version)}
        kind["x-kubernetes-group-version-kind"] = [{"group": r.group, "kind": r.kind, "version": r.version}]
        out[type_name(r, r.kind)] = kind
        out[type_name(r, r.list_kind)] = {
            "description": f"{r.list_kind} is a list of {r.kind}", "type": "object", "required": ["items"],
            "properties": {
                "apiVersion": dict(API_VERSION),
                "items": {"description": f"List of {r.plural}. More info: "
                                         "https://git.k8s.io/community/contributors/devel/sig-architecture/"
                                         "api-conventions.md",
                          "type": "array", "items": {"$ref": _ref(type_name(r, r.kind), version)}},
                "kind": dict(KIND),
                "metadata": {"$ref": _ref(_META + "ListMeta", version)}},
            "x-kubernetes-group-version-kind": [{"group": r.group, "kind": r.list_kind, "version": r.version}]}
    return out
