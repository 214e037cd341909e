"""Printers of the core group (``""``): pods, nodes, services, events, volumes... as printers.go has them."""

from __future__ import annotations

import ipaddress
from typing import Any

from controller_manager.api.meta import parse_time
from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    CONTAINERS,
    IMAGES,
    NAME,
    SELECTOR,
    Column,
    Obj,
    Printer,
    age,
    condition_status,
    container_cells,
    count,
    format_labels,
    human_duration,
    integer,
    meta,
    name,
    pod_template_containers,
    quantity_string,
    since,
    spec,
    status,
)

_NODE_UNREACHABLE_POD_REASON = "NodeLost"
_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
_NODE_ROLE_LABEL = "kubernetes.io/role"
_BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


# --- pods ----------------------------------------------------------------------------------------------

def _is_restartable_init_container(container: Obj | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _later(current: float | None, state: Obj) -> float | None:
    """The later of ``current`` and the finish time of a container's last termination, if it has one."""
    finished = parse_time(((state.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
    if finished is not None and (current is None or current < finished):
        return finished
    return current


def _terminated_reason(terminated: Obj, prefix: str) -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if integer(terminated.get("signal")):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{integer(terminated.get('exitCode'))}"


def _pod_cells(pod: Obj, now: float) -> list[Any]:
    pod_spec, pod_status = spec(pod), status(pod)
    conditions = pod_status.get("conditions") or []
    init_specs = pod_spec.get("initContainers") or []
    restarts = restartable_restarts = 0
    total = len(pod_spec.get("containers") or [])
    ready = 0
    last_restart: float | None = None
    last_restartable_restart: float | None = None

    phase = str(pod_status.get("phase") or "")
    reason = str(pod_status.get("reason") or "") or phase
    for c in conditions:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_by_name = {str(c.get("name")): c for c in init_specs}
    total += sum(1 for c in init_specs if _is_restartable_init_container(c))

    initializing = False
    for i, cs in enumerate(pod_status.get("initContainerStatuses") or []):
        restarts += integer(cs.get("restartCount"))
        last_restart = _later(last_restart, cs)
        restartable = _is_restartable_init_container(init_by_name.get(str(cs.get("name"))))
        if restartable:
            restartable_restarts += integer(cs.get("restartCount"))
            last_restartable_restart = _later(last_restartable_restart, cs)
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting") or {}
        if terminated is not None and integer(terminated.get("exitCode")) == 0:
            continue
        if restartable and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or condition_status(conditions, "Initialized") == "True":
        restarts = restartable_restarts
        last_restart = last_restartable_restart
        has_running = False
        for cs in reversed(pod_status.get("containerStatuses") or []):
            restarts += integer(cs.get("restartCount"))
            last_restart = _later(last_restart, cs)
            state = cs.get("state") or {}
            waiting = state.get("waiting") or {}
            terminated = state.get("terminated")
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None:
                reason = _terminated_reason(terminated, "")
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        # A pod whose last container completed but others still run is shown by its readiness.
        if reason == "Completed" and has_running:
            ready_condition = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if ready_condition else "NotReady"

    deleting = meta(pod).get("deletionTimestamp") is not None
    if deleting and pod_status.get("reason") == _NODE_UNREACHABLE_POD_REASON:
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration(now - last_restart)} ago)"

    ips = pod_status.get("podIPs") or []
    pod_ip = str((ips[0] or {}).get("ip") or "") if ips else str(pod_status.get("podIP") or "")
    gates = pod_spec.get("readinessGates") or []
    readiness_gates = "<none>"
    if gates:
        true_gates = sum(1 for g in gates if condition_status(conditions, g.get("conditionType")) == "True")
        readiness_gates = f"{true_gates}/{len(gates)}"
    return [name(pod), f"{ready}/{total}", reason, restarts_text, age(pod, now),
            pod_ip or "<none>", pod_spec.get("nodeName") or "<none>",
            pod_status.get("nominatedNodeName") or "<none>", readiness_gates]


def _pod_conditions(pod: Obj) -> list[Obj] | None:
    phase = status(pod).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


def _pod_template_cells(obj: Obj, now: float) -> list[Any]:
    template = obj.get("template") or {}
    names, images = container_cells(pod_template_containers(template))
    return [name(obj), names, images, format_labels(meta(template).get("labels"))]


def _replication_controller_cells(obj: Obj, now: float) -> list[Any]:
    st = status(obj)
    names, images = container_cells(pod_template_containers(spec(obj).get("template")))
    return [name(obj), integer(spec(obj).get("replicas", 1)), integer(st.get("replicas")),
            integer(st.get("readyReplicas")), age(obj, now), names, images, format_labels(spec(obj).get("selector"))]


# --- services and endpoints ----------------------------------------------------------------------------

def _load_balancer_ingress(lb_status: Obj) -> str:
    """``loadBalancerStatusStringer`` as the server calls it (wide: never clipped): sorted, distinct."""
    found = {str(i.get("ip") or i.get("hostname") or "") for i in lb_status.get("ingress") or []}
    found.discard("")
    return ",".join(sorted(found))


def _external_ip(svc: Obj) -> str:
    svc_spec = spec(svc)
    external = [str(ip) for ip in svc_spec.get("externalIPs") or []]
    svc_type = svc_spec.get("type")
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if svc_type == "LoadBalancer":
        lb = _load_balancer_ingress(status(svc).get("loadBalancer") or {})
        if external:
            return ",".join(([*lb.split(",")] if lb else []) + external)
        return lb or "<pending>"
    if svc_type == "ExternalName":
        return str(svc_spec.get("externalName") or "")
    return "<unknown>"


def _ports(ports: list[Obj]) -> str:
    pieces = []
    for p in ports:
        node_port = integer(p.get("nodePort"))
        port, protocol = integer(p.get("port")), p.get("protocol") or ""
        pieces.append(f"{port}:{node_port}/{protocol}" if node_port > 0 else f"{port}/{protocol}")
    return ",".join(pieces)


def _service_cells(svc: Obj, now: float) -> list[Any]:
    svc_spec = spec(svc)
    cluster_ips = svc_spec.get("clusterIPs") or ([svc_spec["clusterIP"]] if svc_spec.get("clusterIP") else [])
    return [name(svc), str(svc_spec.get("type") or ""), cluster_ips[0] if cluster_ips else "<none>",
            _external_ip(svc), _ports(svc_spec.get("ports") or []) or "<none>", age(svc, now),
            format_labels(svc_spec.get("selector"))]


def _host_port(ip: str, port: int) -> str:
    """``net.JoinHostPort``: IPv6 addresses in brackets."""
    try:
        if isinstance(ipaddress.ip_address(ip), ipaddress.IPv6Address):
            return f"[{ip}]:{port}"
    except ValueError:
        if ":" in ip:
            return f"[{ip}]:{port}"
    return f"{ip}:{port}"


def format_endpoints(endpoints: Obj) -> str:
    """``formatEndpoints``: up to three ``ip:port`` (or bare IPs of port-less subsets), then ``+ N more...``."""
    subsets = endpoints.get("subsets") or []
    if not subsets:
        return "<none>"
    limit, total = 3, 0
    listed: list[str] = []
    for subset in subsets:
        addresses = [str(a.get("ip") or "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            total += len(addresses)
            listed.extend(addresses[:limit - len(listed)])
            continue
        for port in ports:
            total += len(addresses)
            listed.extend(_host_port(ip, integer(port.get("port"))) for ip in addresses[:limit - len(listed)])
    text = ",".join(listed)
    return f"{text} + {total - limit} more..." if total > limit else text


def _endpoints_cells(obj: Obj, now: float) -> list[Any]:
    return [name(obj), format_endpoints(obj), age(obj, now)]


# --- nodes ---------------------------------------------------------------------------------------------

def node_roles(node: Obj) -> list[str]:
    """``findNodeRoles``: ``node-role.kubernetes.io/<role>`` keys and ``kubernetes.io/role`` values, sorted."""
    roles: set[str] = set()
    for key, value in (meta(node).get("labels") or {}).items():
        if key.startswith(_NODE_ROLE_PREFIX):
            if role := key[len(_NODE_ROLE_PREFIX):]:
                roles.add(role)
        elif key == _NODE_ROLE_LABEL and value:
            roles.add(value)
    return sorted(roles)


def _node_address(node: Obj, kind: str) -> str:
    for address in status(node).get("addresses") or []:
        if address.get("type") == kind:
            return str(address.get("address") or "")
    return "<none>"


def _node_cells(node: Obj, now: float) -> list[Any]:
    # The last Ready condition counts, as upstream reads them through a map by type.
    ready = condition_status(list(reversed(status(node).get("conditions") or [])), "Ready")
    states = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if spec(node).get("unschedulable"):
        states.append("SchedulingDisabled")
    info = status(node).get("nodeInfo") or {}
    return [name(node), ",".join(states), ",".join(node_roles(node)) or "<none>", age(node, now),
            str(info.get("kubeletVersion") or ""), _node_address(node, "InternalIP"),
            _node_address(node, "ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


# --- events --------------------------------------------------------------------------------------------

def _event_source(event: Obj) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingController") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else str(component)


def event_cells(event: Obj, now: float) -> list[Any]:
    """``printEvent`` on a core/v1 Event (events.k8s.io ones are translated to this form first)."""
    first = (since(event.get("firstTimestamp"), now) if event.get("firstTimestamp")
             else since(event.get("eventTime"), now))
    last = since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    total = integer(event.get("count"))
    series = event.get("series")
    if series is not None:
        last = since(series.get("lastObservedTime"), now)
        total = integer(series.get("count"))
    elif total == 0:
        total = 1  # singleton events of the new API carry no count
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    return [last, str(event.get("type") or ""), str(event.get("reason") or ""), target,
            str(involved.get("fieldPath") or ""), _event_source(event), str(event.get("message") or "").strip(),
            first, total, name(event)]


# --- volumes -------------------------------------------------------------------------------------------

def access_modes(modes: Any) -> str:
    """``GetAccessModesAsString``: the short forms in a fixed order."""
    present = set(modes or [])
    return ",".join(short for mode, short in (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"),
                                              ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP"))
                    if mode in present)


def _storage_class(obj: Obj) -> str:
    annotations = meta(obj).get("annotations") or {}
    if _BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[_BETA_STORAGE_CLASS_ANNOTATION])
    return str(spec(obj).get("storageClassName") or "")


def _persistent_volume_cells(pv: Obj, now: float) -> list[Any]:
    pv_spec = spec(pv)
    claim = pv_spec.get("claimRef")
    claim_text = f"{claim.get('namespace') or ''}/{claim.get('name') or ''}" if claim is not None else ""
    phase = "Terminating" if meta(pv).get("deletionTimestamp") else str(status(pv).get("phase") or "")
    return [name(pv), quantity_string((pv_spec.get("capacity") or {}).get("storage")),
            access_modes(pv_spec.get("accessModes")), str(pv_spec.get("persistentVolumeReclaimPolicy") or ""),
            phase, claim_text, _storage_class(pv), pv_spec.get("volumeAttributesClassName") or "<unset>",
            str(status(pv).get("reason") or ""), age(pv, now), pv_spec.get("volumeMode") or "<unset>"]


def _persistent_volume_claim_cells(pvc: Obj, now: float) -> list[Any]:
    pvc_spec, pvc_status = spec(pvc), status(pvc)
    phase = "Terminating" if meta(pvc).get("deletionTimestamp") else str(pvc_status.get("phase") or "")
    capacity = modes = ""
    if pvc_spec.get("volumeName"):
        modes = access_modes(pvc_status.get("accessModes"))
        capacity = quantity_string((pvc_status.get("capacity") or {}).get("storage"))
    return [name(pvc), phase, str(pvc_spec.get("volumeName") or ""), capacity, modes, _storage_class(pvc),
            pvc_spec.get("volumeAttributesClassName") or "<unset>", age(pvc, now),
            pvc_spec.get("volumeMode") or "<unset>"]


# --- the rest ------------------------------------------------------------------------------------------

def _component_status_cells(obj: Obj, now: float) -> list[Any]:
    state, message, error = "Unknown", "", ""
    for c in obj.get("conditions") or []:
        if c.get("type") == "Healthy":
            state = "Healthy" if c.get("status") == "True" else "Unhealthy"
            message, error = str(c.get("message") or ""), str(c.get("error") or "")
            break
    return [name(obj), state, message, error]


def _resource_quota_cells(obj: Obj, now: float) -> list[Any]:
    hard = status(obj).get("hard") or {}
    used = status(obj).get("used") or {}
    requests: list[str] = []
    limits: list[str] = []
    for resource in sorted(hard):
        text = f"{resource}: {quantity_string(used.get(resource))}/{quantity_string(hard[resource])}"
        pieces = resource.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(text)
    return [name(obj), ", ".join(requests), ", ".join(limits), age(obj, now)]


def _named_age(obj: Obj, now: float) -> list[Any]:
    return [name(obj), age(obj, now)]


PRINTERS: dict[str, Printer] = {
    "Pod": Printer((NAME, Column("Ready"), Column("Status"), Column("Restarts"), AGE, Column("IP", priority=1),
                    Column("Node", priority=1), Column("Nominated Node", priority=1),
                    Column("Readiness Gates", priority=1)), _pod_cells, conditions=_pod_conditions),
    "PodTemplate": Printer((NAME, Column("Containers"), Column("Images"), Column("Pod Labels")),
                           _pod_template_cells),
    "ReplicationController": Printer((NAME, Column("Desired", "integer"), Column("Current", "integer"),
                                      Column("Ready", "integer"), AGE, CONTAINERS, IMAGES, SELECTOR),
                                     _replication_controller_cells),
    "Service": Printer((NAME, Column("Type"), Column("Cluster-IP"), Column("External-IP"), Column("Port(s)"), AGE,
                        SELECTOR), _service_cells),
    "Endpoints": Printer((NAME, Column("Endpoints"), AGE), _endpoints_cells),
    "Node": Printer((NAME, Column("Status"), Column("Roles"), AGE, Column("Version"),
                     Column("Internal-IP", priority=1), Column("External-IP", priority=1),
                     Column("OS-Image", priority=1), Column("Kernel-Version", priority=1),
                     Column("Container-Runtime", priority=1)), _node_cells),
    "Event": Printer((Column("Last Seen"), Column("Type"), Column("Reason"), Column("Object"),
                      Column("Subobject", priority=1), Column("Source", priority=1), Column("Message"),
                      Column("First Seen", priority=1), Column("Count", priority=1),
                      Column("Name", format="name", priority=1)), event_cells),
    "Namespace": Printer((NAME, Column("Status"), AGE),
                         lambda o, now: [name(o), str(status(o).get("phase") or ""), age(o, now)]),
    "Secret": Printer((NAME, Column("Type"), Column("Data"), AGE),
                      lambda o, now: [name(o), str(o.get("type") or ""), count(o.get("data")), age(o, now)]),
    "ServiceAccount": Printer((NAME, Column("Secrets"), AGE),
                              lambda o, now: [name(o), count(o.get("secrets")), age(o, now)]),
    "PersistentVolume": Printer((NAME, Column("Capacity"), Column("Access Modes"), Column("Reclaim Policy"),
                                 Column("Status"), Column("Claim"), Column("StorageClass"),
                                 Column("VolumeAttributesClass"), Column("Reason"), AGE,
                                 Column("VolumeMode", priority=1)), _persistent_volume_cells),
    "PersistentVolumeClaim": Printer((NAME, Column("Status"), Column("Volume"), Column("Capacity"),
                                      Column("Access Modes"), Column("StorageClass"),
                                      Column("VolumeAttributesClass"), AGE, Column("VolumeMode", priority=1)),
                                     _persistent_volume_claim_cells),
    "ComponentStatus": Printer((NAME, Column("Status"), Column("Message"), Column("Error")),
                               _component_status_cells),
    "ConfigMap": Printer((NAME, Column("Data"), AGE),
                         lambda o, now: [name(o), count(o.get("data")) + count(o.get("binaryData")), age(o, now)]),
    "ResourceQuota": Printer((NAME, Column("Request"), Column("Limit"), AGE), _resource_quota_cells),
}
