"""The descriptor of one served version of a CRD, and the CustomResourceDefinition resource itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource

Obj = dict[str, Any]

GROUP = "apiextensions.k8s.io"
CUSTOMRESOURCEDEFINITIONS = Resource(GROUP, "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
                                     ("crd", "crds"), ("status",), categories=("api-extensions",))


@dataclass(frozen=True, slots=True)
class CustomResource(Resource):
    """A CRD's served version: a :class:`Resource` that also carries what the CRD says about it. The extra
    fields take no part in equality, so it compares equal to the plain descriptor of the same version."""

    crd_name: str = field(default="", compare=False)
    list_kind: str = field(default="", compare=False)
    storage_version: str = field(default="", compare=False)  # the apiVersion objects are stored in
    schema: Obj | None = field(default=None, compare=False, hash=False)  # the version's openAPIV3Schema
    storage_schema: Obj | None = field(default=None, compare=False, hash=False)  # the storage version's
    scale: Obj | None = field(default=None, compare=False, hash=False)  # subresources.scale
    columns: tuple[Obj, ...] = field(default=(), compare=False, hash=False)  # additionalPrinterColumns


def list_kind(res: Resource) -> str:
    """The kind of a list of ``res``'s objects: a CRD may name its own (``spec.names.listKind``)."""
    return res.list_kind if isinstance(res, CustomResource) and res.list_kind else f"{res.kind}List"


def is_definition(res: Resource) -> bool:
    return res.group == GROUP and res.kind == "CustomResourceDefinition"
