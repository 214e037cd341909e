"""The real kubectl against kube-sim for the kinds and admission plugins of issue 14."""

from __future__ import annotations

import asyncio
import json

from tests.sim.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401  (the fixture)

POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  priorityClassName: {klass}
  containers:
  - name: c
    image: nginx
"""


async def failing(kubectl: Kubectl, *args: str, stdin: str | None = None) -> str:  # noqa: F811
    proc = await asyncio.create_subprocess_exec(*kubectl.base, *args, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 30)
    assert proc.returncode != 0
    return err.decode()


async def test_create_quota(kubectl: Kubectl) -> None:  # noqa: F811
    out = await kubectl("create", "quota", "q", "--hard=pods=2,requests.cpu=1,count/configmaps=3",
                        "--scopes=NotTerminating")
    assert out.strip() == "resourcequota/q created"
    quota = json.loads(await kubectl("get", "quota", "q", "-o", "json"))
    assert quota["spec"] == {"hard": {"count/configmaps": "3", "pods": "2", "requests.cpu": "1"},
                             "scopes": ["NotTerminating"]}
    assert "q" in await kubectl("get", "resourcequotas")


async def test_unknown_priority_class_is_refused(kubectl: Kubectl) -> None:  # noqa: F811
    err = await failing(kubectl, "apply", "-f", "-", stdin=POD.format(name="x", klass="foo"))
    assert 'pods "x" is forbidden: no PriorityClass with name foo was found' in err
    await kubectl("apply", "-f", "-", stdin=POD.format(name="crit", klass="system-cluster-critical"))
    assert await kubectl("get", "pod", "crit", "-o", "jsonpath={.spec.priority}") == "2000000000"
    assert "system-node-critical" in await kubectl("get", "pc")


async def test_limit_range_defaults_a_run_pod(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin="""apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 128Mi}
    defaultRequest: {cpu: 100m}
""")
    await kubectl("run", "web", "--image=nginx")
    resources = json.loads(await kubectl("get", "pod", "web", "-o", "jsonpath={.spec.containers[0].resources}"))
    assert resources == {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m",
                                                                                     "memory": "128Mi"}}


async def test_describe_new_kinds(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin="""apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {pods: "3"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec: {limits: [{type: Container, max: {cpu: "1"}}]}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: h}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 3}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: i}
spec: {defaultBackend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /data}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: sc}
provisioner: example.com/disk
""")
    # (the quota shows no rows: nothing here fills its status.hard, as without a resourcequota controller)
    for kind, name, expect in (("quota", "q", "Resource    Used  Hard"), ("limits", "lr", "Container"),
                               ("hpa", "h", "Deployment/web"), ("ingress", "i", "web:80"), ("pv", "pv1", "Pending"),
                               ("sc", "sc", "example.com/disk")):
        out = await kubectl("describe", kind, name)
        assert expect in out, out


async def test_server_side_apply_of_new_kinds(kubectl: Kubectl) -> None:  # noqa: F811
    manifest = """apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: h}
spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 3,
       targetCPUUtilizationPercentage: 60}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {pods: "3"}}
---
apiVersion: v1
kind: Service
metadata: {name: np}
spec: {type: NodePort, selector: {app: web}, ports: [{port: 80}]}
"""
    await kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    await kubectl("apply", "--server-side", "-f", "-", stdin=manifest.replace("maxReplicas: 3", "maxReplicas: 5"))
    v2 = json.loads(await kubectl("get", "hpa", "h", "-o", "json"))
    assert v2["spec"]["maxReplicas"] == 5
    assert v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    port = json.loads(await kubectl("get", "svc", "np", "-o", "json"))["spec"]["ports"][0]["nodePort"]
    assert 30000 <= port <= 32767
