"""The ``scale`` subresource of a custom resource: an autoscaling/v1 Scale read from and written to the
paths its CRD names (``specReplicasPath``, ``statusReplicasPath``, ``labelSelectorPath``), as upstream's
``pkg/registry/customresource`` scale storage maps them. A missing replicas field reads as 0, a missing
selector as none."""

from __future__ import annotations

import copy
from typing import Any

from controller_manager.sim.apiserver.crd.resource import CustomResource

Obj = dict[str, Any]


def _path(json_path: Any) -> list[str]:
    return [p for p in str(json_path or "").lstrip(".").split(".") if p]


def _get(obj: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def scale_of(res: CustomResource, obj: Obj) -> Obj:
    paths = res.scale or {}
    meta = obj["metadata"]
    spec_replicas = _get(obj, _path(paths.get("specReplicasPath")))
    status_replicas = _get(obj, _path(paths.get("statusReplicasPath")))
    status: Obj = {"replicas": status_replicas if isinstance(status_replicas, int) else 0}
    if paths.get("labelSelectorPath"):
        selector = _get(obj, _path(paths["labelSelectorPath"]))
        if isinstance(selector, str) and selector:
            status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": spec_replicas if isinstance(spec_replicas, int) else 0}, "status": status}


def with_replicas(res: CustomResource, obj: Obj, replicas: int) -> Obj:
    out = copy.deepcopy(obj)
    path = _path((res.scale or {}).get("specReplicasPath"))
    target = out
    for part in path[:-1]:
        nxt = target.get(part)
        if not isinstance(nxt, dict):
            nxt = target[part] = {}
        target = nxt
    if path:
        target[path[-1]] = replicas
    return out
