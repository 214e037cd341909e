"""A realistic pod as the API server serves it (~3 KB of JSON), for memory measurements.

Pods come from a few ReplicaSets spread over a few nodes, with the fields a real cluster fills in:
managedFields from kube-controller-manager and the kubelet, the projected service-account volume, default
tolerations, five conditions, a running container status.
"""

from __future__ import annotations

import random
import string

import orjson


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def _ts(second: int) -> str:
    return f"2024-05-01T10:{second // 60 % 60:02d}:{second % 60:02d}Z"


def pod_json(i: int, *, replicasets: int = 10, nodes: int = 20, seed: int = 0) -> bytes:
    rng = random.Random(seed * 1_000_003 + i)
    rs = i % replicasets
    app = f"app-{rs}"
    rs_name = f"{app}-7d4b9c8f5"
    name = f"{rs_name}-{_suffix(rng)}"
    node = f"node-{i % nodes}"
    created = _ts(i // 7)
    uid = (f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}"
           f"-a{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}")
    token_volume = f"kube-api-access-{_suffix(rng)}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{rs_name}-",
            "namespace": "default",
            "uid": uid,
            "resourceVersion": str(100_000 + i),
            "creationTimestamp": created,
            "labels": {"app": app, "pod-template-hash": "7d4b9c8f5", "tier": "backend"},
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
                "image": f"registry.example.com/team/{app}:1.4.2",
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
            "hostIP": f"10.0.0.{i % nodes + 10}",
            "hostIPs": [{"ip": f"10.0.0.{i % nodes + 10}"}],
            "podIP": f"10.244.{i // 250}.{i % 250 + 2}",
            "podIPs": [{"ip": f"10.244.{i // 250}.{i % 250 + 2}"}],
            "startTime": created,
            "containerStatuses": [{
                "name": "web",
                "state": {"running": {"startedAt": _ts(i // 7 + 2)}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": f"registry.example.com/team/{app}:1.4.2",
                "imageID": f"registry.example.com/team/{app}@sha256:{rs:064x}",
                "containerID": f"containerd://{rng.getrandbits(256):064x}",
                "started": True,
            }],
            "qosClass": "Burstable",
        },
    }
    return orjson.dumps(pod)
