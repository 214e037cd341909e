"""Discovery documents, shaped as the apiserver serves them: /version, /api, /apis, the per-group and
per-version lists, and the aggregated form (apidiscovery.k8s.io/v2) kubectl asks for first.

Guarantees: groups and versions come in the aggregator's order (APIService priorities, see :mod:`apiservices`);
every served resource is listed with its singular name, scope, kind, verbs, short names and
categories; its subresources (``pods/status``, ``deployments/scale``, ``pods/eviction``, ...) are listed
with their own kinds and verbs. Documents are pure functions of the resource table.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import apiservices
from controller_manager.sim.apiserver.crd.definition import version_priority

Obj = dict[str, Any]

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

# subresource -> (group, version, kind or None for the parent's kind, verbs)
_SUBRESOURCES: dict[str, tuple[str | None, str | None, str | None, tuple[str, ...]]] = {
    "status": (None, None, None, ("get", "patch", "update")),
    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update")),
    "binding": ("", "v1", "Binding", ("create",)),
    "eviction": ("policy", "v1", "Eviction", ("create",)),
    "finalize": (None, None, None, ("update",)),
    "approval": (None, None, None, ("get", "patch", "update")),
    "token": ("authentication.k8s.io", "v1", "TokenRequest", ("create",)),
    "attach": ("", "v1", "PodAttachOptions", ("create", "get")),
    "exec": ("", "v1", "PodExecOptions", ("create", "get")),
    "portforward": ("", "v1", "PodPortForwardOptions", ("create", "get")),
}


def version_info(git_version: str) -> Obj:
    core = git_version.lstrip("v").split("-")[0].split(".")
    major, minor = [*core, "0", "0"][:2]
    return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "minCompatibilityMajor": major, "minCompatibilityMinor": str(max(0, int(minor) - 1)),
            "gitVersion": git_version, "gitCommit": "0" * 40, "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0", "compiler": "gc",
            "platform": "linux/amd64"}


def _groups(resources: tuple[Resource, ...]) -> dict[str, list[str]]:
    """Served groups and their versions in the aggregator's order (``SortedByGroupAndVersion``): APIServices by
    groupPriorityMinimum, highest first, then by name; a group where its first APIService falls; a group's versions
    by versionPriority, highest first, then kube-aware version order."""
    served: list[tuple[str, str]] = []
    for r in resources:
        if (r.group, r.version) not in served:
            served.append((r.group, r.version))
    priorities = {gv: apiservices.priority(*gv) for gv in served}
    ranked = sorted(served, key=lambda gv: (-priorities[gv][0], f"{gv[1]}.{gv[0]}"))
    groups: dict[str, list[str]] = {}
    for group, version in ranked:
        groups.setdefault(group, []).append(version)

    def version_order(group: str, version: str) -> tuple[int, tuple[int, int, int, str]]:
        return (-priorities[(group, version)][1], version_priority(version))

    return {group: sorted(versions, key=functools.partial(version_order, group)) for group, versions in groups.items()}


def api_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(resources: tuple[Resource, ...]) -> Obj:
    groups = [_group(g, vs) for g, vs in _groups(resources).items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(resources: tuple[Resource, ...], group: str) -> Obj | None:
    versions = _groups(resources).get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _hash(r: Resource) -> str:
    digest = hashlib.sha256(f"{r.group}/{r.version}/{r.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_resource_list(resources: tuple[Resource, ...], group: str, version: str) -> Obj | None:
    served = [r for r in resources if r.group == group and r.version == version]
    if not served:
        return None
    items: list[Obj] = []
    for r in served:
        entry: Obj = {"name": r.plural, "singularName": r.singular_name, "namespaced": r.namespaced,
                      "kind": r.kind, "verbs": list(r.verbs)}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        if "get" in r.verbs:
            entry["storageVersionHash"] = _hash(r)
        items.append(entry)
        for sub in r.subresources:
            g, v, kind, verbs = _SUBRESOURCES.get(sub, (None, None, None, ("get",)))
            sub_entry: Obj = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced}
            if g is not None and (g, v) != (r.group, r.version):
                sub_entry["group"] = g
                sub_entry["version"] = v
            sub_entry["kind"] = kind or r.kind
            sub_entry["verbs"] = list(verbs)
            items.append(sub_entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
            "resources": items}


def aggregated(resources: tuple[Resource, ...], *, core: bool) -> Obj:
    """APIGroupDiscoveryList of the core group (``/api``) or of the named groups (``/apis``)."""
    items: list[Obj] = []
    for group, versions in _groups(resources).items():
        if bool(group) == core:
            continue
        version_docs = []
        for v in versions:
            res_docs = []
            for r in (r for r in resources if r.group == group and r.version == v):
                doc: Obj = {"resource": r.plural,
                            "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                            "scope": "Namespaced" if r.namespaced else "Cluster",
                            "singularResource": r.singular_name, "verbs": list(r.verbs)}
                if r.short_names:
                    doc["shortNames"] = list(r.short_names)
                if r.categories:
                    doc["categories"] = list(r.categories)
                subs = []
                for sub in r.subresources:
                    g, sv, kind, verbs = _SUBRESOURCES.get(sub, (None, None, None, ("get",)))
                    subs.append({"subresource": sub,
                                 "responseKind": {"group": r.group if g is None else g,
                                                  "version": r.version if sv is None else sv,
                                                  "kind": kind or r.kind},
                                 "verbs": list(verbs)})
                if subs:
                    doc["subresources"] = subs
                res_docs.append(doc)
            version_docs.append({"version": v, "resources": res_docs, "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": version_docs})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}
