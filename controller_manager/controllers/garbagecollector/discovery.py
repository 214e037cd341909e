"""What the collector watches and how it maps an ownerReference's apiVersion/kind to a resource.

Guarantees:
- :func:`discover` reads ``/api``, ``/apis`` and every served group/version, as client-go's discovery does.
  A group/version that fails is recorded in ``failed`` (upstream's ``ErrGroupDiscoveryFailed``) and the others
  are still returned; a failure of ``/api`` or ``/apis`` is the ``error`` with nothing discovered.
- :func:`preferred_resources` keeps, for each group and resource, the first version the server lists (its
  preference order), as ``ServerPreferredResources``.
- :func:`get_deletable_resources` (upstream's ``GetDeletableResources``) keeps the resources supporting
  ``delete``, ``list`` and ``watch``, skipping resource lists whose groupVersion does not parse.
- :class:`RestMapper` maps (apiVersion, kind) to the resource serving it in *that* version (a kind referenced
  through a version that is no longer served does not map, as upstream's REST mapper), from every version
  served, not only the preferred one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.client import ApiClient
from controller_manager.client.discovery import group_versions, resources_from_list
from controller_manager.client.errors import ApiError

GVR = tuple[str, str, str]  # group, version, plural
REQUIRED_VERBS = frozenset(("delete", "list", "watch"))


@dataclass
class Discovery:
    """One discovery pass: APIResourceList documents by groupVersion, in the server's order."""

    resource_lists: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)  # (group, version) -> error
    error: Exception | None = None


async def discover(client: ApiClient) -> Discovery:
    try:
        core = await client.request("GET", "/api")
        groups = await client.request("GET", "/apis")
    except ApiError as err:
        return Discovery(error=err)
    gvs = group_versions(core or {}, groups or {})

    async def one(group: str, version: str) -> dict[str, Any] | ApiError:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = await client.request("GET", path)
        except ApiError as err:
            return err
        return dict(doc or {})

    docs = await asyncio.gather(*(one(g, v) for g, v in gvs))
    out = Discovery()
    for (group, version), doc in zip(gvs, docs, strict=True):
        if isinstance(doc, ApiError):
            out.failed[(group, version)] = str(doc)
            continue
        out.resource_lists.append({**doc, "groupVersion": f"{group}/{version}" if group else version})
    if out.failed:
        out.error = GroupDiscoveryFailed(out.failed)
    return out


class GroupDiscoveryFailed(Exception):
    def __init__(self, groups: Mapping[tuple[str, str], str]) -> None:
        self.groups = dict(groups)
        listed = ", ".join(f"{g}/{v}: {e}" if g else f"{v}: {e}" for (g, v), e in sorted(self.groups.items()))
        super().__init__(f"unable to retrieve the complete list of server APIs: {listed}")


def parse_group_version(text: str) -> tuple[str, str] | None:
    """``("apps", "v1")`` from ``apps/v1``, ``("", "v1")`` from ``v1``; None if malformed (``foo//bar``)."""
    if not text:
        return None
    parts = text.split("/")
    if len(parts) == 1:
        return ("", parts[0])
    if len(parts) == 2 and parts[0] and parts[1]:
        return (parts[0], parts[1])
    return None


def list_resources(resource_lists: Iterable[Mapping[str, Any]]) -> list[Resource]:
    """Every top-level resource in the lists (subresources folded into their parents)."""
    out: list[Resource] = []
    for doc in resource_lists:
        gv = parse_group_version(str(doc.get("groupVersion", "")))
        if gv is None:
            continue
        out.extend(resources_from_list(gv[0], gv[1], doc))
    return out


def preferred_resources(resource_lists: Iterable[Mapping[str, Any]]) -> list[Resource]:
    """One version per group/resource: the first listed (lists arrive in the server's preference order)."""
    seen: set[tuple[str, str]] = set()
    out: list[Resource] = []
    for res in list_resources(resource_lists):
        if (res.group, res.plural) in seen:
            continue
        seen.add((res.group, res.plural))
        out.append(res)
    return out


def get_deletable_resources(resource_lists: Iterable[Mapping[str, Any]]) -> dict[GVR, Resource]:
    """The preferred resources that support delete, list and watch, by (group, version, plural)."""
    return {(r.group, r.version, r.plural): r for r in preferred_resources(resource_lists)
            if REQUIRED_VERBS.issubset(r.verbs)}


class RestMapper:
    """(apiVersion, kind) -> Resource, from the latest discovery."""

    def __init__(self, resources: Iterable[Resource] = ()) -> None:
        self._by_kind: dict[tuple[str, str], Resource] = {}
        self.reset(resources)

    def reset(self, resources: Iterable[Resource]) -> None:
        by_kind: dict[tuple[str, str], Resource] = {}
        for res in resources:
            # The first resource of a kind in a version wins (a kind served under two names is rare).
            by_kind.setdefault((res.api_version, res.kind), res)
        self._by_kind = by_kind

    def resource_for(self, api_version: str, kind: str) -> Resource | None:
        return self._by_kind.get((api_version, kind))
