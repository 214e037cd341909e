"""A recording stand-in for the ApiClient calls the namespace deleter makes (client-go's fake clientset
plus the metadata client's test server, in one).

``actions`` records typed-client calls as ``verb-resource-subresource`` (``get-namespaces-``,
``update-namespaces-status``, ``update-namespaces-finalize``, ``list-pods-``), as upstream's tests name
them; ``metadata_actions`` records the generic calls as ``METHOD=path`` (``GET=/api/v1/namespaces/test/pods``
for a metadata-only list, ``DELETE=...`` for a deletecollection or an item delete).
``reactors[(verb, plural)]`` may raise (or return items) instead of the default answer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, cast

from controller_manager.api.resources import NAMESPACES, PODS, Resource
from controller_manager.client import ApiClient, NotFound
from controller_manager.controllers.namespace.deleter import DiscoverFn

Obj = dict[str, Any]
Reactor = Callable[[str | None], Any]  # namespace -> items, or raises


def not_found(what: str = "") -> NotFound:
    return NotFound(404, "NotFound", f'"{what}" not found')


class FakeClient:
    def __init__(self, *namespaces: Obj, content: Mapping[str, list[Obj]] | None = None) -> None:
        self.namespaces: dict[str, Obj] = {ns["metadata"]["name"]: copy.deepcopy(ns) for ns in namespaces}
        self.content: dict[str, list[Obj]] = {k: list(v) for k, v in (content or {}).items()}
        self.actions: list[str] = []
        self.metadata_actions: list[str] = []
        self.reactors: dict[tuple[str, str], Reactor] = {}
        self.get_reactor: Callable[[str], Obj] | None = None

    def as_client(self) -> ApiClient:
        return cast(ApiClient, self)

    def _react(self, verb: str, res: Resource, namespace: str | None) -> Any:
        reactor = self.reactors.get((verb, res.plural))
        return None if reactor is None else reactor(namespace)

    # --- typed client ------------------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        assert res is NAMESPACES
        self.actions.append("get-namespaces-")
        if self.get_reactor is not None:
            return self.get_reactor(name)
        if name not in self.namespaces:
            raise not_found(name)
        return copy.deepcopy(self.namespaces[name])

    async def update_status(self, res: Resource, obj: Obj) -> Obj:
        assert res is NAMESPACES
        self.actions.append("update-namespaces-status")
        name = obj["metadata"]["name"]
        if name not in self.namespaces:
            raise not_found(name)
        stored = self.namespaces[name]
        self.namespaces[name] = {**stored, "status": copy.deepcopy(obj.get("status") or {})}
        return copy.deepcopy(self.namespaces[name])

    async def request(self, method: str, path: str, *, params: Any = None, body: Any = None,
                      content_type: str | None = None, accept: str | None = None) -> Any:
        assert method == "PUT", method
        assert path.endswith("/finalize"), path
        self.actions.append("update-namespaces-finalize")
        self.finalized_with = copy.deepcopy(body)
        name = body["metadata"]["name"]
        if name not in self.namespaces:
            raise not_found(name)
        stored = self.namespaces[name]
        self.namespaces[name] = {**stored, "spec": {**stored.get("spec", {}),
                                                    "finalizers": list(body["spec"]["finalizers"])}}
        return copy.deepcopy(self.namespaces[name])

    # --- generic (metadata) client -------------------------------------------------------------------

    async def list_all(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                       field_selector: str | None = None, page_size: int = 500,
                       metadata_only: bool = False) -> tuple[list[Obj], str]:
        if res is PODS and not metadata_only:
            self.actions.append("list-pods-")
        else:
            self.metadata_actions.append(f"GET={res.path(namespace)}")
        reacted = self._react("list", res, namespace)
        if reacted is not None:
            return list(reacted), "1"
        return list(self.content.get(res.plural, [])), "1"

    async def delete_collection(self, res: Resource, namespace: str | None = None, *,
                                propagation_policy: str | None = None, label_selector: str | None = None,
                                field_selector: str | None = None) -> Obj:
        assert propagation_policy == "Background"
        self.metadata_actions.append(f"DELETE={res.path(namespace)}")
        self._react("deletecollection", res, namespace)
        return {"kind": "Status", "status": "Success"}

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, grace_period_seconds: int | None = None,
                     uid: str | None = None, resource_version: str | None = None) -> Obj:
        assert propagation_policy == "Background"
        self.metadata_actions.append(f"DELETE={res.path(namespace, name)}")
        self._react("delete", res, namespace)
        return {"kind": "Status", "status": "Success"}


def fixed_discovery(resources: list[Resource], error: BaseException | None = None) -> DiscoverFn:
    async def discover() -> tuple[list[Resource], BaseException | None]:
        return list(resources), error

    return discover


def api_resource(group: str, version: str, plural: str, kind: str, *, namespaced: bool = True,
                 verbs: tuple[str, ...] = ("get", "list", "delete", "deletecollection", "create", "update")
                 ) -> Resource:
    return Resource(group, version, plural, kind, namespaced, verbs=verbs)


def sample_resources() -> list[Resource]:
    """Upstream's ``testResources()``: pods and services in v1, deployments in apps/v1."""
    return [
        api_resource("", "v1", "pods", "Pod"),
        api_resource("", "v1", "services", "Service"),
        api_resource("apps", "v1", "deployments", "Deployment"),
    ]
