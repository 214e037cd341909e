"""Upstream's OpenAPI schemas of the release kube-sim serves (1.37), as the ``kubernetes-validate`` package
ships them (strict: no unknown fields), with validators built once per kind: the package's own ``validate``
re-reads the 2 MB definitions file on every call."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import orjson
from referencing import Registry, Resource

UPSTREAM = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / "v1.37.0-local-strict"


@functools.cache
def _registry() -> Registry[Any]:
    return Resource.from_contents(orjson.loads((UPSTREAM / "_definitions.json").read_bytes())) @ Registry()


@functools.cache
def validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)  # rbac.authorization.k8s.io/v1 -> rbac-v1
    schema = orjson.loads((UPSTREAM / f"{kind.lower()}-{group_version}.json").read_bytes())
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ _registry())


def check(obj: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``obj`` (with its apiVersion and kind) is valid upstream."""
    validator(obj["apiVersion"], obj["kind"]).validate(obj)


@functools.cache
def definitions() -> dict[str, Any]:
    """The package's definitions, by OpenAPI type name (``io.k8s.api.apps.v1.DeploymentSpec``)."""
    return orjson.loads((UPSTREAM / "_definitions.json").read_bytes())["$defs"]  # type: ignore[no-any-return]


_ENUM_HEADER = "Possible enum values:"


def without_enum_values(description: str) -> str:
    """A description as the documents checked in upstream carry it: generated with the OpenAPIEnums feature
    gate off, so without the enum section a server (gate on, the default) appends to an enum field's text
    (the gate's own pruning: everything from the header on, surrounding whitespace trimmed)."""
    at = description.find(_ENUM_HEADER)
    return description if at < 0 else description[:at].strip()
