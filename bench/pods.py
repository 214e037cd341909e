"""Realistic pods, as an API server serves them, and watch streams of them.

Guarantees:
- ``pod(i)`` is deterministic in ``i`` (and ``seed``): a pod of a ReplicaSet, scheduled and running, with the
  fields a real cluster fills in (two managedFields entries, the projected service-account volume, default
  tolerations, five conditions, a container status). About 4 KB of JSON, 3.2 KB without managedFields (a
  little above the 3 KB the issue names: heavier pods make every target harder, not easier).
- Pods of one ReplicaSet differ where real ones do (name, uid, resourceVersion, IPs, container ID, times) and
  share what real ones share (labels, template, owner reference, node names from a pool).
- ``watch_lines(n)`` is the body of a watch as the API server streams it: one ``{"type","object"}`` JSON line
  per event, newline-terminated.
"""

from __future__ import annotations

import random
import string
from typing import Any

import orjson

_ALPHABET = string.ascii_lowercase + string.digits


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(n))


def _ts(second: int) -> str:
    return f"2024-05-01T{10 + second // 3600 % 12:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


def pod(
    i: int, *, replicasets: int = 100, nodes: int = 100, seed: int = 0, namespace: str = "default"
) -> dict[str, Any]:
    rng = random.Random(seed * 1_000_003 + i)
    rs = i % replicasets
    app = f"app-{rs}"
    template_hash = f"{rs:05d}7d4b9"[:10]
    rs_name = f"{app}-{template_hash}"
    node = f"node-{i % nodes}"
    created = _ts(i // 7)
    uid = (f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}"
           f"-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}")
    token_volume = f"kube-api-access-{_suffix(rng)}"
    image = f"registry.example.com/team/{app}:1.4.2"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{rs_name}-{_suffix(rng)}",
            "generateName": f"{rs_name}-",
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": str(100_000 + i),
            "creationTimestamp": created,
            "labels": {"app": app, "pod-template-hash": template_hash, "tier": "backend"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                "uid": f"00000000-0000-4000-8000-{rs:012d}", "controller": True, "blockOwnerDeletion": True,
            }],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": created,
                 "fieldsType": "FieldsV1", "fieldsV1": {
                     "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {},
                                                                        "f:tier": {}},
                                    "f:ownerReferences": {".": {}, f'k:{{"uid":"{rs}"}}': {}}},
                     "f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {},
                                                                      "f:resources": {}}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": _ts(i // 7 + 3),
                 "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {
                     "f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {},
                                  "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}},
            ],
        },
        "spec": {
            "volumes": [{"name": token_volume, "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                              "fieldPath": "metadata.namespace"}}]}},
            ], "defaultMode": 420}}],
            "containers": [{
                "name": "web",
                "image": image,
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "PORT", "value": "8080"}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                              "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": token_volume, "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                   "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                   "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": node,
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _ts(i // 7 + d)}
                for t, d in (("PodReadyToStartContainers", 2), ("Initialized", 0), ("Ready", 3),
                             ("ContainersReady", 3), ("PodScheduled", 0))
            ],
            "hostIP": f"10.0.{i % nodes // 250}.{i % nodes % 250 + 2}",
            "hostIPs": [{"ip": f"10.0.{i % nodes // 250}.{i % nodes % 250 + 2}"}],
            "podIP": f"10.{i // 62500 % 250 + 1}.{i // 250 % 250}.{i % 250 + 2}",
            "podIPs": [{"ip": f"10.{i // 62500 % 250 + 1}.{i // 250 % 250}.{i % 250 + 2}"}],
            "startTime": created,
            "containerStatuses": [{
                "name": "web",
                "state": {"running": {"startedAt": _ts(i // 7 + 2)}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": image,
                "imageID": f"registry.example.com/team/{app}@sha256:{rs:064x}",
                "containerID": f"containerd://{rng.getrandbits(256):064x}",
                "started": True,
            }],
            "qosClass": "Burstable",
        },
    }


def pod_json(i: int, **kwargs: Any) -> bytes:
    return orjson.dumps(pod(i, **kwargs))


def watch_line(i: int, event_type: str = "ADDED", **kwargs: Any) -> bytes:
    return orjson.dumps({"type": event_type, "object": pod(i, **kwargs)}) + b"\n"


def watch_lines(n: int, **kwargs: Any) -> list[bytes]:
    """``n`` ADDED events of distinct pods, each line newline-terminated."""
    return [watch_line(i, **kwargs) for i in range(n)]


def chunked(lines: list[bytes], size: int = 1 << 16) -> list[bytes]:
    """The stream as the socket delivers it: the lines joined and cut into ``size``-byte chunks (lines split
    across chunk boundaries, as on the wire)."""
    body = b"".join(lines)
    return [body[i:i + size] for i in range(0, len(body), size)]
