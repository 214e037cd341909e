"""Builders for the Deployment util tests: the JSON shapes of deployment_util_test.go's generateDeployment and
generateRS."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from controller_manager.api.meta import format_time

_uids = itertools.count(1)

T0 = 1_700_000_000.0


def deployment(name: str = "nginx", replicas: int | None = 1, **spec: Any) -> dict[str, Any]:
    """generateDeployment: one container named and imaged ``name``, the API defaults spelled out."""
    labels = {"name": name}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "uid": f"d-{name}", "annotations": {}},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [
                        {
                            "name": name,
                            "image": name,
                            "imagePullPolicy": "Always",
                            "terminationMessagePath": "/dev/termination-log",
                        }
                    ],
                    "dnsPolicy": "ClusterFirst",
                    "terminationGracePeriodSeconds": 30,
                    "restartPolicy": "Always",
                    "securityContext": {},
                    "enableServiceLinks": True,
                },
            },
            **spec,
        },
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    return body


def rolling(replicas: int | None, max_surge: Any, max_unavailable: Any, **extra: Any) -> dict[str, Any]:
    """A RollingUpdate Deployment with the given fenceposts (None leaves a fencepost unset)."""
    params = {}
    if max_surge is not None:
        params["maxSurge"] = max_surge
    if max_unavailable is not None:
        params["maxUnavailable"] = max_unavailable
    return deployment(replicas=replicas, strategy={"type": "RollingUpdate", "rollingUpdate": params}, **extra)


def replica_set(
    d: dict[str, Any],
    replicas: int = 0,
    *,
    name: str | None = None,
    hash_label: str | None = None,
    created: float | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """generateRS: the Deployment's template as the ReplicaSet's, owned by the Deployment."""
    template = copy.deepcopy(d["spec"]["template"])
    if hash_label is not None:
        template["metadata"]["labels"]["pod-template-hash"] = hash_label
    uid = next(_uids)
    metadata: dict[str, Any] = {
        "name": name or f"{d['metadata']['name']}-{uid}",
        "namespace": "default",
        "uid": f"rs-{uid}",
        "labels": dict(template["metadata"]["labels"]),
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": d["metadata"]["name"],
             "uid": d["metadata"]["uid"], "controller": True}
        ],
    }
    if created is not None:
        metadata["creationTimestamp"] = format_time(created)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    rs: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(template["metadata"]["labels"])},
            "template": template,
        },
    }
    if status is not None:
        rs["status"] = dict(status)
    return rs
