"""URL paths to request attributes, as the apiserver's ``RequestInfoFactory`` parses them.

``/api/v1/namespaces/ns/pods/name/status`` -> verb, group "", version v1, namespace ns, resource pods,
name, subresource status. ``/api/v1/namespaces/ns`` is the namespace object itself; ``status`` and
``finalize`` after a namespace name are its subresources. The deprecated ``/watch/`` prefix and
``?watch=true`` make a list a watch; a list or watch (by GET without a name) whose field selector requires
``metadata.name`` to be one name is for that name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller_manager.api.fields import parse_field_selector
from controller_manager.api.selectors import InvalidSelector

_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass
class RequestInfo:
    is_resource: bool
    path: str
    verb: str
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    extra_parts: int = 0


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true")


def _selected_name(selector: str) -> str:
    """The name a field selector requires exactly (``metadata.name=x``), when it is a valid path segment."""
    try:
        name = parse_field_selector(selector).requires_exact_match("metadata.name") if selector else None
    except InvalidSelector:
        return ""
    if not name or name in (".", "..") or "/" in name or "%" in name:
        return ""
    return name


def parse(method: str, path: str, query: Any) -> RequestInfo:
    parts = [p for p in path.strip("/").split("/") if p != ""]
    verb = _VERBS.get(method.upper(), method.lower())
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(False, path, verb)
    if parts[0] == "api":
        if len(parts) < 2:
            return RequestInfo(False, path, verb)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return RequestInfo(False, path, verb)
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return RequestInfo(False, path, verb, group=group, version=version)
    info = RequestInfo(True, path, verb, group=group, version=version)
    watch_prefix = rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
        verb = "watch"
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        info.namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return RequestInfo(False, path, verb, group=group, version=version)
    info.resource = rest[0]
    if len(rest) > 1:
        info.name = rest[1]
    if len(rest) > 2:
        info.subresource = rest[2]
    info.extra_parts = max(0, len(rest) - 3)
    if verb == "watch":
        info.verb = "watch"
    elif verb == "get" and not info.name:
        info.verb = "watch" if _truthy(query.get("watch", "")) else "list"
        # A list or watch of one object by its name is authorized as a request for that name.
        selected = _selected_name(query.get("fieldSelector", ""))
        if selected:
            info.name = selected
    elif verb == "delete" and not info.name:
        info.verb = "deletecollection"
    else:
        info.verb = verb
    return info
