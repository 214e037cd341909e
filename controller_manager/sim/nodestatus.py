"""The Node a simulated kubelet registers, and the conditions it posts about it.

Guarantees:
- :class:`KubeletConfig` holds the kubelet's intervals (the real kubelet's defaults where one
  exists) and the node's shape (capacity, instance type, region, versions).
- :func:`node_object` is the Node a kubelet registers, status included: capacity and allocatable,
  the well-known labels (hostname, os, arch, instance type, zone, region), addresses, nodeInfo with
  stable machine/system/boot IDs derived from the name, the kubelet endpoint, a pod CIDR.
- :func:`node_conditions` gives the four kubelet conditions (MemoryPressure, DiskPressure,
  PIDPressure False; Ready True, reason ``KubeletReady``) with the heartbeat at ``now`` and each
  transition time kept while its status holds.
- Node ``index`` ``i`` gets InternalIP ``172.18.x.y`` and pod CIDR ``10.(244+i/256).(i%256).0/24``, wrapping round
  inside 10.0.0.0/8 past node 3,071 (:func:`pod_cidr`): valid and distinct for 65,536 nodes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import format_time

__all__ = ["NODE_CONDITIONS", "KubeletConfig", "node_conditions", "node_ip", "node_object", "pod_cidr"]


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """Intervals (seconds) and node shape. Defaults are the real kubelet's where one exists."""

    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0
    lease_duration_seconds: int = 40
    lease_renew_interval: float = 10.0  # the kubelet renews at a quarter of the lease duration
    default_start_seconds: float = 0.0  # pull + create + start, when the pod does not say
    termination_delay: float = 0.5  # cap on a graceful termination (the sim's containers stop fast)
    crash_loop_base: float = 1.0  # CrashLoopBackOff starts here and doubles (the kubelet: 10 s)
    crash_loop_max: float = 10.0  # (the kubelet: 300 s)
    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"
    ephemeral_storage: str = "100Gi"
    instance_type: str = "sim.large"
    region: str = "sim-region"
    kubelet_version: str = "v1.37.0"  # the API server's release (ApiServerOptions.git_version)
    container_runtime_version: str = "containerd://1.7.22"
    events: bool = True  # record Pulled/Created/Started/Killing/BackOff events
    # Register each Node with spec.podCIDR(s) already set (pod_cidr(index)). Off: the Node registers without
    # them, as a real kubelet does, for a controller-manager's node-ipam-controller (--allocate-node-cidrs).
    register_pod_cidr: bool = True


def node_object(name: str, index: int, zone: str, config: KubeletConfig, now: float) -> dict[str, Any]:
    """The Node a kubelet registers (status included: node registration sends it)."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    resources = {"cpu": config.cpu, "memory": config.memory, "pods": config.pods,
                 "ephemeral-storage": config.ephemeral_storage, "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": config.instance_type,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": config.region,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": ({"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)]} if config.register_pod_cidr else {})
        | {"providerID": f"kube-sim://{name}"},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": node_conditions(now, {}),
            "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": digest[:32],
                "systemUUID": f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}",
                "bootID": digest[32:64],
                "kernelVersion": "6.8.0-sim",
                "osImage": "kube-sim Linux",
                "containerRuntimeVersion": config.container_runtime_version,
                "kubeletVersion": config.kubelet_version,
                "kubeProxyVersion": "",  # deprecated: kubelets leave it empty since DisableNodeKubeProxyVersion
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


NODE_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def node_conditions(now: float, current: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The kubelet's node conditions, heartbeat now; transition time kept where the status did not change."""
    ts = format_time(now)
    out = []
    for ctype, status, reason, message in NODE_CONDITIONS:
        prev = current.get(ctype)
        since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else None
        out.append({"type": ctype, "status": status, "lastHeartbeatTime": ts, "lastTransitionTime": since or ts,
                    "reason": reason, "message": message})
    return out


def node_ip(index: int) -> str:
    """The InternalIP of the node with this index."""
    n = index + 2
    return f"172.18.{n // 256}.{n % 256}"


def pod_cidr(index: int) -> str:
    """The pod CIDR of the node with this index: the index-th /24 from 10.244.0.0, wrapping round inside 10.0.0.0/8
    (node 3,072 gets 10.0.0.0/24), so 65,536 nodes have distinct valid ones."""
    n = (244 * 256 + index) % 65536
    return f"10.{n // 256}.{n % 256}.0/24"
