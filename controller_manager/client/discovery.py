"""Discovery documents into Resource descriptors.

Guarantees:
- :func:`resources_from_list` reads one ``APIResourceList`` (``/api/v1``, ``/apis/apps/v1``) into
  :class:`~controller_manager.api.resources.Resource` objects, one per top-level resource. Entries
  naming a subresource (``pods/status``, ``deployments/scale``) are not resources of their own: they
  are recorded in their parent's ``subresources``, in the order served.
- :func:`group_versions` lists every served group/version from ``/api`` and ``/apis``, core first,
  then groups in the server's order (its preference order), each group's versions in order.
- Pure functions over parsed JSON; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.resources import Resource


def group_versions(core: Mapping[str, Any], groups: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``[("", "v1"), ("apps", "v1"), ...]`` from the ``APIVersions`` and ``APIGroupList`` documents."""
    out: list[tuple[str, str]] = [("", str(v)) for v in core.get("versions") or ()]
    for group in groups.get("groups") or ():
        name = str(group.get("name", ""))
        for version in group.get("versions") or ():
            ver = version.get("version")
            if not ver:
                gv = str(version.get("groupVersion", ""))
                ver = gv.rpartition("/")[2]
            if name and ver:
                out.append((name, str(ver)))
    return out


def resources_from_list(group: str, version: str, doc: Mapping[str, Any]) -> list[Resource]:
    """The top-level resources of one group/version's ``APIResourceList``."""
    entries = doc.get("resources") or ()
    subresources: dict[str, list[str]] = {}
    tops: list[Mapping[str, Any]] = []
    for entry in entries:
        name = str(entry.get("name", ""))
        parent, sep, sub = name.partition("/")
        if sep:
            subresources.setdefault(parent, []).append(sub)
        elif name:
            tops.append(entry)
    out: list[Resource] = []
    for entry in tops:
        name = str(entry["name"])
        out.append(Resource(
            group=group,
            version=version,
            plural=name,
            kind=str(entry.get("kind", "")),
            namespaced=bool(entry.get("namespaced", False)),
            short_names=tuple(entry.get("shortNames") or ()),
            subresources=tuple(subresources.get(name, ())),
            verbs=tuple(entry.get("verbs") or ()),
            categories=tuple(entry.get("categories") or ()),
            singular=str(entry.get("singularName") or ""),
        ))
    return out
