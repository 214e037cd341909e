"""Builders of ReplicaSet and Pod dicts for the ReplicaSet controller's unit tests (upstream's newReplicaSet/newPod)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import format_time

_rv = itertools.count(100)


def new_replica_set(replicas: int, selector: Mapping[str, str], *, name: str = "foobar", namespace: str = "default",
                    owner_uid: str | None = "123") -> dict[str, Any]:
    """A ReplicaSet selecting ``selector`` whose template carries name=foo,type=production (as upstream's)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                            "resourceVersion": "18", "generation": 1}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": owner_uid,
                                    "controller": True}]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": {"name": "foo", "type": "production"}},
                "spec": {"containers": [{"name": "c", "image": "foo/bar"}], "restartPolicy": "Always"},
            },
        },
    }


def new_pod(name: str, rs: Mapping[str, Any], phase: str, *, ready_since: float | None = None, owned: bool = True,
            node: str | None = None, ready: bool | None = None, labels: Mapping[str, str] | None = None
            ) -> dict[str, Any]:
    """A pod for ``rs``, labelled with its selector. Running pods are Ready unless ``ready`` says otherwise."""
    rs_meta = rs["metadata"]
    conditions = []
    is_ready = (phase == "Running") if ready is None else ready
    if phase == "Running" or ready is not None:
        cond: dict[str, Any] = {"type": "Ready", "status": "True" if is_ready else "False"}
        if ready_since is not None:
            cond["lastTransitionTime"] = format_time(ready_since)
        conditions.append(cond)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": rs_meta["namespace"],
        "uid": str(uuid.uuid4()),
        "resourceVersion": str(next(_rv)),
        "labels": dict(labels if labels is not None else rs["spec"]["selector"]["matchLabels"]),
    }
    if owned:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_meta["name"],
                                    "uid": rs_meta["uid"], "controller": True, "blockOwnerDeletion": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "foo/bar"}]}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": conditions}}


def terminating(pod: Mapping[str, Any], at: float = 1_700_000_000.0) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": format_time(at)}}


def with_meta(obj: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``obj`` with metadata fields replaced (None removes one)."""
    meta = {**obj["metadata"], **changes}
    return {**obj, "metadata": {k: v for k, v in meta.items() if v is not None}}
