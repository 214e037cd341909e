"""A minimal OpenAPI v3 tree: what kubectl reads from it, and nothing more.

kubectl (create/apply/replace with the default ``--validate=strict``) reads ``/openapi/v3`` and the
group-version document of the object's kind to learn whether the server validates fields itself
(the ``fieldValidation`` query parameter of the kind's PATCH operation). Each served resource's object
path is listed with a PATCH operation tagged ``x-kubernetes-group-version-kind`` and carrying that
parameter; schemas are not published, so kubectl falls back to its compiled-in types for patches.
"""

from __future__ import annotations

import hashlib
from typing import Any

from controller_manager.api.resources import Resource

Obj = dict[str, Any]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def root(resources: tuple[Resource, ...]) -> Obj:
    paths: Obj = {}
    for r in resources:
        gv = _gv_path(r.group, r.version)
        digest = hashlib.sha256(gv.encode()).hexdigest()[:16].upper()
        paths.setdefault(gv, {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"})
    return {"paths": paths}


def group_version(resources: tuple[Resource, ...], gv_path: str, git_version: str) -> Obj | None:
    served = [r for r in resources if _gv_path(r.group, r.version) == gv_path]
    if not served:
        return None
    params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
              {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
    paths: Obj = {}
    for r in served:
        if "patch" not in r.verbs:
            continue
        base = f"/{gv_path}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"/{gv_path}/{r.plural}"
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        paths[f"{base}/{{name}}"] = {
            "patch": {"operationId": f"patch{r.kind}", "parameters": params,
                      "responses": {"200": {"description": "OK"}},
                      "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk},
        }
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": git_version}, "paths": paths,
            "components": {"schemas": {}}}
