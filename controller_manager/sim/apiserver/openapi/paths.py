"""The operations of the served resources, as kube-apiserver's OpenAPI lists them.

For each resource: the collection (list, create, deletecollection), the object (read, replace, patch,
delete), the watch paths, and the subresources (status, scale, binding, eviction, finalize), each operation
with its ``operationId`` (``patchAppsV1NamespacedDeployment``), query parameters, request body, responses,
``x-kubernetes-action`` and ``x-kubernetes-group-version-kind``. :func:`group_version_paths` returns them in the
OpenAPI v3 form; :func:`to_v2` turns one path item into swagger 2.0's form.

Descriptions are upstream's: an operation's as kube-apiserver's endpoint installer words it ("read the
specified Deployment", "create an Ingress", "read scale of the specified Deployment"), a query parameter's
the description of the options field it sets (ListOptions, CreateOptions, UpdateOptions, PatchOptions,
DeleteOptions: :mod:`.descriptions`), ``name`` and ``namespace`` as the installer names them.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.crd import openapi as crd_openapi
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.openapi import descriptions

Obj = dict[str, Any]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
PLAIN_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
_STREAM = ("application/json", "application/json;stream=watch", "application/vnd.kubernetes.protobuf",
           "application/vnd.kubernetes.protobuf;stream=watch", "application/yaml")
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json")
# A custom resource takes no strategic merge patch (kubectl reads this list to choose its patch type).
_CUSTOM_PATCH_TYPES: tuple[str, ...] = _PATCH_TYPES[:3]
_STATUS_TEXT = {"200": "OK", "201": "Created", "202": "Accepted", "401": "Unauthorized"}
# subresource -> (kind's group, version, kind or None for the resource's own, operations)
_SUBRESOURCES: dict[str, tuple[str, str, str | None, tuple[str, ...]]] = {
    "status": ("", "", None, ("get", "put", "patch")),
    "scale": ("autoscaling", "v1", "Scale", ("get", "put", "patch")),
    "binding": ("", "v1", "Binding", ("post",)),
    "eviction": ("policy", "v1", "Eviction", ("post",)),
    "finalize": ("", "", None, ("put",)),
}
_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
                "resourceVersionMatch", "sendInitialEvents", "shardSelector", "timeoutSeconds", "watch")
_PARAM_TYPES = {"allowWatchBookmarks": "boolean", "watch": "boolean", "sendInitialEvents": "boolean",
                "force": "boolean", "orphanDependents": "boolean",
                "ignoreStoreReadErrorWithClusterBreakingPotential": "boolean",
                "limit": "integer", "timeoutSeconds": "integer", "gracePeriodSeconds": "integer"}
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
                  "orphanDependents", "propagationPolicy")
_DELETECOLLECTION_PARAMS = tuple(sorted({*_DELETE_PARAMS, *(p for p in _LIST_PARAMS
                                                             if p not in ("allowWatchBookmarks", "watch"))}))


def type_name(group: str, version: str, kind: str) -> str:
    """The OpenAPI name of a built-in kind's struct: ``io.k8s.api.apps.v1.Deployment``."""
    from controller_manager.sim.apiserver import schema

    api_version = f"{group}/{version}" if group else version
    found = schema.kinds().get(f"{api_version}/{kind}")
    if found is None:
        raise KeyError(f"no kind {api_version}/{kind} in the schema")
    return found


def gv_path(group: str, version: str) -> str:
    """``api/v1``, ``apis/apps/v1``: the group-version's name in ``/openapi/v3``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def camel_group(group: str) -> str:
    """``rbac.authorization.k8s.io`` -> ``RbacAuthorization``; the core group is ``Core``."""
    if not group:
        return "Core"
    return "".join(part[:1].upper() + part[1:] for part in group.removesuffix(".k8s.io").split("."))


def tag(group: str, version: str) -> str:
    camel = camel_group(group)
    return f"{camel[:1].lower()}{camel[1:]}_{version}"


# The options struct whose fields a query parameter of an operation sets (and whose field describes it).
_OPTIONS = {"get": "ListOptions", "post": "CreateOptions", "put": "UpdateOptions", "patch": "PatchOptions",
            "delete": "DeleteOptions"}
_PRETTY = ("If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a "
           "browser or command-line HTTP tool (curl and wget).")
_NAMESPACE = "object name and auth scope, such as for teams and projects"


def _param(name: str, where: str = "query", description: str = "") -> Obj:
    out: Obj = {"name": name, "in": where, "schema": {"type": _PARAM_TYPES.get(name, "string"), "uniqueItems": True}}
    if description:
        out["description"] = description
    if where == "path":
        out["required"] = True
    return out


def _query(name: str, method: str = "get") -> Obj:
    """A query parameter, described by the options field it sets (a delete-collection's list parameters by
    ListOptions')."""
    if name == "pretty":
        return _param(name, description=_PRETTY)
    options = _OPTIONS[method]
    text = descriptions.of_field(_META + options, name)
    if not text and method == "delete":
        text = descriptions.of_field(_META + "ListOptions", name)
    return _param(name, description=text)


def _name(kind: str) -> Obj:
    return _param("name", "path", f"name of the {kind}")


def _namespace() -> Obj:
    return _param("namespace", "path", _NAMESPACE)


def _article(noun: str) -> str:
    """The installer's article before a kind: none for a plural-looking one, "an" before a vowel."""
    if noun.endswith("s") and not noun.endswith("ss"):
        return " "
    return " an " if noun[:1].lower() in "aeiou" else " a "


def content(ref: str, types: tuple[str, ...] = PLAIN_TYPES) -> Obj:
    return {t: {"schema": {"$ref": "#/components/schemas/" + ref}} for t in types}


def _responses(ref: str, codes: tuple[str, ...], types: tuple[str, ...] = PLAIN_TYPES) -> Obj:
    out: Obj = {code: {"description": _STATUS_TEXT[code], "content": content(ref, types)} for code in codes}
    out["401"] = {"description": _STATUS_TEXT["401"]}
    return out


def _operation(op_id: str, action: str, gvk: Obj, group: str, version: str, responses: Obj,
               params: tuple[str, ...] = (), body: Obj | None = None, *, description: str, method: str) -> Obj:
    op: Obj = {"description": description, "operationId": op_id, "tags": [tag(group, version)]}
    if params:
        op["parameters"] = [_query(p, method) for p in params]
    if body is not None:
        op["requestBody"] = body
    op["responses"] = responses
    op["x-kubernetes-action"] = action
    op["x-kubernetes-group-version-kind"] = gvk
    return op


def _body(ref: str, types: tuple[str, ...] = ("*/*",), required: bool = True) -> Obj:
    out: Obj = {"content": content(ref, types)}
    if required:
        out["required"] = True
    return out


def _hoisted(item: Obj) -> Obj:
    """A path item with the parameters every one of its operations takes moved to the item, sorted by name,
    as kube-openapi's builder lists a route's common parameters once."""
    ops = [op for method, op in item.items() if method != "parameters"]
    names = [{p["name"] for p in op.get("parameters", ())} for op in ops]
    common = set.intersection(*names) if names else set()
    shared = {p["name"]: p for p in item.get("parameters", ())}
    for op in ops:
        kept = []
        for p in op.get("parameters", ()):
            if p["name"] in common:
                shared[p["name"]] = p
            else:
                kept.append(p)
        if kept:
            op["parameters"] = kept
        else:
            op.pop("parameters", None)
    item["parameters"] = [shared[name] for name in sorted(shared)]
    return item


def _resource_paths(r: Resource) -> dict[str, Obj]:
    gv = f"/{gv_path(r.group, r.version)}"
    prefix = camel_group(r.group) + r.version[:1].upper() + r.version[1:]
    scope = "Namespaced" if r.namespaced else ""
    if isinstance(r, CustomResource):
        kind_ref, list_ref = crd_openapi.type_name(r, r.kind), crd_openapi.type_name(r, r.list_kind)
        patch_types = _CUSTOM_PATCH_TYPES
    else:
        kind_ref = type_name(r.group, r.version, r.kind)
        list_ref = type_name(r.group, r.version, r.kind + "List") if "list" in r.verbs else ""
        patch_types = _PATCH_TYPES
    kind = r.kind
    gvk = {"group": r.group, "version": r.version, "kind": kind}
    ns_params = [_namespace()] if r.namespaced else []
    collection = f"{gv}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{gv}/{r.plural}"
    paths: dict[str, Obj] = {}
    g, v = r.group, r.version
    listed = f"list or watch objects of kind {kind}" if "watch" in r.verbs else f"list objects of kind {kind}"

    item: Obj = {}
    if "list" in r.verbs:
        item["get"] = _operation(f"list{prefix}{scope}{kind}", "list", gvk, g, v,
                                 _responses(list_ref, ("200",), _STREAM), _LIST_PARAMS,
                                 description=listed, method="get")
    if "create" in r.verbs:
        item["post"] = _operation(f"create{prefix}{scope}{kind}", "post", gvk, g, v,
                                  _responses(kind_ref, ("200", "201", "202")), _WRITE_PARAMS, _body(kind_ref),
                                  description=f"create{_article(kind)}{kind}", method="post")
    if "deletecollection" in r.verbs:
        item["delete"] = _operation(f"delete{prefix}Collection{scope}{kind}", "deletecollection", gvk, g, v,
                                    _responses(_META + "Status", ("200",)), _DELETECOLLECTION_PARAMS,
                                    _body(_META + "DeleteOptions", required=False),
                                    description=f"delete collection of {kind}", method="delete")
    if item:
        item["parameters"] = [*ns_params, _query("pretty")]
        paths[collection] = _hoisted(item)

    item = {}
    if "get" in r.verbs:
        item["get"] = _operation(f"read{prefix}{scope}{kind}", "get", gvk, g, v, _responses(kind_ref, ("200",)),
                                 description=f"read the specified {kind}", method="get")
    if "update" in r.verbs:
        item["put"] = _operation(f"replace{prefix}{scope}{kind}", "put", gvk, g, v,
                                 _responses(kind_ref, ("200", "201")), _WRITE_PARAMS, _body(kind_ref),
                                 description=f"replace the specified {kind}", method="put")
    if "patch" in r.verbs:
        item["patch"] = _operation(f"patch{prefix}{scope}{kind}", "patch", gvk, g, v,
                                   _responses(kind_ref, ("200", "201")), (*_WRITE_PARAMS, "force"),
                                   _body(_META + "Patch", patch_types),
                                   description=f"partially update the specified {kind}", method="patch")
    if "delete" in r.verbs:
        item["delete"] = _operation(f"delete{prefix}{scope}{kind}", "delete", gvk, g, v,
                                    _responses(_META + "Status", ("200", "202")), _DELETE_PARAMS,
                                    _body(_META + "DeleteOptions", required=False),
                                    description=f"delete{_article(kind)}{kind}", method="delete")
    if item:
        item["parameters"] = [_name(kind), *ns_params, _query("pretty")]
        paths[f"{collection}/{{name}}"] = _hoisted(item)

    for sub in r.subresources:
        if sub not in _SUBRESOURCES:
            continue
        sg, sv, skind, ops = _SUBRESOURCES[sub]
        sub_gvk = {"group": sg, "version": sv, "kind": skind} if skind else gvk
        ref = type_name(sg, sv, skind) if skind else kind_ref
        suffix = sub[:1].upper() + sub[1:]
        item = {}
        for op in ops:
            if op == "get":
                item["get"] = _operation(f"read{prefix}{scope}{kind}{suffix}", "get", sub_gvk, g, v,
                                         _responses(ref, ("200",)),
                                         description=f"read {sub} of the specified {kind}", method="get")
            elif op == "put":
                item["put"] = _operation(f"replace{prefix}{scope}{kind}{suffix}", "put", sub_gvk, g, v,
                                         _responses(ref, ("200", "201")), _WRITE_PARAMS, _body(ref),
                                         description=f"replace {sub} of the specified {kind}", method="put")
            elif op == "patch":
                item["patch"] = _operation(f"patch{prefix}{scope}{kind}{suffix}", "patch", sub_gvk, g, v,
                                           _responses(ref, ("200", "201")), (*_WRITE_PARAMS, "force"),
                                           _body(_META + "Patch", patch_types),
                                           description=f"partially update {sub} of the specified {kind}",
                                           method="patch")
            elif op == "post":
                item["post"] = _operation(f"create{prefix}{scope}{kind}{suffix}", "post", sub_gvk, g, v,
                                          _responses(ref, ("200", "201", "202")), _WRITE_PARAMS, _body(ref),
                                          description=f"create {sub} of{_article(kind)}{kind}", method="post")
        item["parameters"] = [_name(skind or kind), *ns_params, _query("pretty")]
        paths[f"{collection}/{{name}}/{sub}"] = _hoisted(item)

    if "watch" in r.verbs:
        watch_base = f"{gv}/watch/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{gv}/watch/{r.plural}"
        event = _META + "WatchEvent"
        common = [_query(p) for p in _LIST_PARAMS]
        watch_list = (f"watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a "
                      "list operation instead.")
        watch_one = (f"watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list "
                     "operation instead, filtered to a single item with the 'fieldSelector' parameter.")
        paths[watch_base] = {
            "get": _operation(f"watch{prefix}{scope}{kind}List", "watchlist", gvk, g, v,
                              _responses(event, ("200",), _STREAM), description=watch_list, method="get"),
            "parameters": sorted([*common, *ns_params, _query("pretty")], key=lambda p: p["name"])}
        paths[f"{watch_base}/{{name}}"] = {
            "get": _operation(f"watch{prefix}{scope}{kind}", "watch", gvk, g, v,
                              _responses(event, ("200",), _STREAM), description=watch_one, method="get"),
            "parameters": sorted([*common, _name(kind), *ns_params, _query("pretty")], key=lambda p: p["name"])}
        if r.namespaced:
            paths[f"{gv}/watch/{r.plural}"] = {
                "get": _operation(f"watch{prefix}{kind}ListForAllNamespaces", "watchlist", gvk, g, v,
                                  _responses(event, ("200",), _STREAM), description=watch_list, method="get"),
                "parameters": sorted([*common, _query("pretty")], key=lambda p: p["name"])}
    if r.namespaced and "list" in r.verbs:
        paths[f"{gv}/{r.plural}"] = {
            "get": _operation(f"list{prefix}{kind}ForAllNamespaces", "list", gvk, g, v,
                              _responses(list_ref, ("200",), _STREAM), description=listed, method="get"),
            "parameters": sorted([*(_query(p) for p in _LIST_PARAMS), _query("pretty")], key=lambda p: p["name"])}
    return paths


def group_version_paths(resources: tuple[Resource, ...], group: str, version: str) -> Obj:
    """The v3 path items of one group-version: its resource list (``/apis/apps/v1/``) and every resource's."""
    prefix = camel_group(group) + version[:1].upper() + version[1:]
    paths: Obj = {f"/{gv_path(group, version)}/": {"get": {
        "description": "get available resources", "operationId": f"get{prefix}APIResources",
        "tags": [tag(group, version)],
        "responses": _responses(_META + "APIResourceList", ("200",))}}}
    for r in resources:
        if r.group == group and r.version == version:
            paths.update(_resource_paths(r))
    return dict(sorted(paths.items()))


def to_v2(item: Obj) -> Obj:
    """A v3 path item in swagger 2.0's form: parameters with their type inline, the body as a ``body``
    parameter, ``consumes``/``produces`` lists, responses with their schema."""
    out: Obj = {}
    for method, op in item.items():
        if method == "parameters":
            out["parameters"] = [_param_v2(p) for p in op]
            continue
        v2: Obj = {}
        body = op.get("requestBody")
        v2["consumes"] = list(body["content"]) if body else ["*/*"]
        produces: list[str] = []
        responses: Obj = {}
        for code, resp in op["responses"].items():
            r2: Obj = {"description": resp["description"]}
            for media, content in resp.get("content", {}).items():
                if media not in produces:
                    produces.append(media)
                r2["schema"] = {"$ref": content["schema"]["$ref"].replace("#/components/schemas/", "#/definitions/")}
            responses[code] = r2
        v2["produces"] = produces
        v2["schemes"] = ["https"]
        v2["tags"] = op["tags"]
        if op.get("description"):
            v2["description"] = op["description"]
        v2["operationId"] = op["operationId"]
        params = [_param_v2(p) for p in op.get("parameters", ())]
        if body:
            schema_ref = next(iter(body["content"].values()))["schema"]["$ref"]
            body_param: Obj = {"name": "body", "in": "body",
                               "schema": {"$ref": schema_ref.replace("#/components/schemas/", "#/definitions/")}}
            if body.get("required"):
                body_param["required"] = True
            params.insert(0, body_param)
        if params:
            v2["parameters"] = params
        v2["responses"] = responses
        for key in ("x-kubernetes-action", "x-kubernetes-group-version-kind"):
            if key in op:
                v2[key] = op[key]
        out[method] = v2
    return out


def _param_v2(p: Obj) -> Obj:
    out: Obj = {"uniqueItems": True, "type": p["schema"]["type"], "name": p["name"], "in": p["in"]}
    if p.get("description"):
        out["description"] = p["description"]
    if p.get("required"):
        out["required"] = True
    return out
