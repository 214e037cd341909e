"""The pod status a simulated kubelet reports: computed from scratch at every stage, as the kubelet's
``generateAPIPodStatus`` does, merged with what the API holds, as its status manager does.

Guarantees:
- :func:`build_pod_status` returns the complete status for a :class:`PodRun` at a stage: nothing is
  carried over from an earlier write except what the kubelet itself carries (``startTime``, each
  condition's ``lastTransitionTime`` while its status holds, ``qosClass``) and the conditions the
  kubelet does not own (``DisruptionTarget``, readiness-gate conditions), which come first.
- The kubelet-owned conditions come in the kubelet's order: ``PodReadyToStartContainers``,
  ``Initialized``, ``Ready``, ``ContainersReady``, ``PodScheduled``; ``reason``/``message`` appear only
  where ``pkg/kubelet/status/generate.go`` sets them (``ContainersNotReady`` with "containers with
  unready status: [a b]", ``ContainersNotInitialized``, ``ReadinessGatesNotReady``, ``PodCompleted`` /
  ``PodFailed`` once terminal); a True condition never carries either.
- Container statuses follow the runtime: ``waiting`` (``ContainerCreating``, or ``PodInitializing``
  when the pod has init containers; the spec's image, no imageID) -> ``running`` (``startedAt``;
  containerd's normalised image, imageID, containerID) -> ``terminated`` (exitCode, reason
  ``Completed``/``Error``, startedAt, finishedAt, containerID), with ``CrashLoopBackOff`` waiting and
  the previous run in ``lastState`` across restarts. Regular containers are sorted by name, init
  containers keep the spec's order, as the kubelet reports them. A created container lists its
  ``volumeMounts`` (name, mountPath, and for read-only ones ``recursiveReadOnly: Disabled``).
- Pure: no I/O, no clock (``now`` is passed in); inputs are never mutated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time, meta
from controller_manager.clock import TimerHandle

__all__ = [
    "KUBELET_CONDITIONS",
    "PodRun",
    "build_pod_status",
    "container_id",
    "go_duration",
    "normalize_image",
]

# The conditions the kubelet owns (kubetypes.PodConditionsByKubelet), in the order it writes them.
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
_KUBELET_OWNED = frozenset(KUBELET_CONDITIONS)

# pkg/kubelet/status/generate.go's reasons.
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"


def normalize_image(image: str) -> str:
    """How containerd reports an image reference: ``nginx`` -> ``docker.io/library/nginx:latest``."""
    name = image
    first, _, rest = name.partition("/")
    if not rest:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    last = name.rsplit("/", 1)[-1]
    if "@" not in last and ":" not in last:
        name += ":latest"
    return name


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def image_id(image: str) -> str:
    """A repo digest for a normalised image, stable per image."""
    return f"{image.rsplit(':', 1)[0]}@sha256:{_digest(image)}"


def container_id(pod_uid: str, name: str, attempt: int) -> str:
    """The containerd ID of one run (``attempt``: restarts before it) of a container: stable, unique per run."""
    return f"containerd://{_digest(pod_uid, name, str(attempt))}"


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()``: ``500ms``, ``10s``, ``1m20s``, ``5m0s``, ``1h0m0s``."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return sign + secs


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


@dataclass(slots=True)
class PodRun:
    """What the kubelet knows of one pod bound to its node (all containers of a pod share one fate)."""

    uid: str
    node: str
    pod: dict[str, Any]
    # new -> creating -> running <-> backoff -> exited; any -> terminating -> confirmed; gone once deleted
    stage: str = "new"
    generation: int = 0  # bumped whenever timers are cancelled, so a stale timer does nothing
    timers: list[TimerHandle] = field(default_factory=list)
    ip: str | None = None
    started_at: float | None = None
    restarts: int = 0
    ready: bool = False
    terminated: dict[str, Any] | None = None  # the current run's terminated state (no containerID)
    last_state: dict[str, Any] | None = None  # the previous run's terminated state (no containerID)
    last_attempt: int = 0  # which run last_state describes
    backoff: float = 0.0  # the CrashLoopBackOff delay now being waited out
    start_time: str | None = None

    def cancel_timers(self) -> None:
        self.generation += 1
        for t in self.timers:
            t.cancel()
        self.timers.clear()

    def terminated_state(self, code: int, now: float, reason: str | None = None) -> dict[str, Any]:
        """A ContainerStateTerminated for the current run ending at ``now`` (keys in the API's order)."""
        return {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                "startedAt": format_time(self.started_at if self.started_at is not None else now),
                "finishedAt": format_time(now)}


def _condition(ctype: str, ok: bool, previous: Mapping[str, Mapping[str, Any]], now: str,
               reason: str = "", message: str = "") -> dict[str, Any]:
    """One condition; its transition time is kept while the status stays what the API already shows."""
    status = "True" if ok else "False"
    prev = previous.get(ctype)
    since = prev.get("lastTransitionTime") if prev is not None and prev.get("status") == status else None
    out: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None,
                           "lastTransitionTime": since or now}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _names(containers: Sequence[Mapping[str, Any]]) -> str:
    """Go's ``%s`` of a []string: ``[a b]``."""
    return "[" + " ".join(str(c.get("name", "")) for c in containers) + "]"


def _gate_messages(spec: Mapping[str, Any], conditions: Sequence[Mapping[str, Any]]) -> list[str]:
    by_type = {c.get("type"): c for c in conditions}
    out = []
    for gate in spec.get("readinessGates") or ():
        ctype = str(gate.get("conditionType", ""))
        cond = by_type.get(ctype)
        if cond is None:
            out.append(f'corresponding condition of pod readiness gate "{ctype}" does not exist.')
        elif cond.get("status") != "True":
            out.append(f'the status of pod readiness gate "{ctype}" is not "True", but {cond.get("status")}')
    return out


def _container_status(run: PodRun, c: Mapping[str, Any], waiting_reason: str, now: float) -> dict[str, Any]:
    name = str(c.get("name", ""))
    spec_image = str(c.get("image", ""))
    stage = run.stage
    if stage == "creating":
        # No container yet: the kubelet's default waiting status, with the image as the spec names it.
        return {"name": name, "state": {"waiting": {"reason": waiting_reason}}, "lastState": {}, "ready": False,
                "restartCount": run.restarts, "image": spec_image, "imageID": "", "started": False}
    image = normalize_image(spec_image)
    cid = container_id(run.uid, name, run.restarts)
    state: dict[str, Any]
    if stage == "running":
        state = {"running": {"startedAt": format_time(run.started_at if run.started_at is not None else now)}}
    elif stage == "backoff":
        m = meta(run.pod)
        state = {"waiting": {"reason": "CrashLoopBackOff", "message":
                             f"back-off {go_duration(run.backoff)} restarting failed container={name} "
                             f"pod={m.get('name')}_{m.get('namespace')}({run.uid})"}}
    else:
        ended = run.terminated or run.terminated_state(0, now)
        state = {"terminated": {**ended, "containerID": cid}}
    last: dict[str, Any] = {}
    if run.last_state is not None:
        last = {"terminated": {**run.last_state, "containerID": container_id(run.uid, name, run.last_attempt)}}
    return _with_mounts({"name": name, "state": state, "lastState": last, "ready": stage == "running" and run.ready,
                         "restartCount": run.restarts, "image": image, "imageID": image_id(image), "containerID": cid,
                         "started": stage == "running"}, c)


def _init_container_status(run: PodRun, c: Mapping[str, Any], start_time: str) -> dict[str, Any]:
    # The sim's init containers complete the moment the pod's sandbox is up.
    name = str(c.get("name", ""))
    spec_image = str(c.get("image", ""))
    if run.stage == "creating":
        return {"name": name, "state": {"waiting": {"reason": "PodInitializing"}}, "lastState": {}, "ready": False,
                "restartCount": 0, "image": spec_image, "imageID": "", "started": False}
    image = normalize_image(spec_image)
    cid = container_id(run.uid, name, 0)
    return _with_mounts({"name": name,
                         "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": start_time,
                                                  "finishedAt": start_time, "containerID": cid}},
                         "lastState": {}, "ready": True, "restartCount": 0, "image": image,
                         "imageID": image_id(image), "containerID": cid, "started": False}, c)


def _with_mounts(status: dict[str, Any], c: Mapping[str, Any]) -> dict[str, Any]:
    """A created container's mounts, as the kubelet reports them since RecursiveReadOnlyMounts (1.31, beta):
    read-only ones say whether the read-only is recursive (the sim's runtime cannot: Disabled)."""
    mounts = []
    for m in c.get("volumeMounts") or ():
        if not isinstance(m, Mapping):
            continue
        mount: dict[str, Any] = {"name": m.get("name", ""), "mountPath": m.get("mountPath", "")}
        if m.get("readOnly"):
            mount["readOnly"] = True
            mount["recursiveReadOnly"] = "Disabled"
        mounts.append(mount)
    if mounts:
        status["volumeMounts"] = mounts
    return status


def build_pod_status(run: PodRun, now: float, host_ip: str, current: Mapping[str, Any], *,
                     killed: bool = False) -> dict[str, Any]:
    """The complete status the kubelet reports for ``run`` at ``now``.

    ``current`` is the status the API holds now (its non-kubelet conditions, transition times, start
    time and QoS class carry over); ``killed``: the containers were stopped by a deletion.
    """
    spec = run.pod.get("spec") or {}
    containers = list(spec.get("containers") or ())
    inits = list(spec.get("initContainers") or ())
    stage = run.stage
    ts = format_time(now)
    start_time = run.start_time or current.get("startTime") or ts

    if stage == "exited":
        code = int((run.terminated or {}).get("exitCode", 0))
        phase = "Succeeded" if code == 0 and not killed else "Failed"
    else:
        phase = "Pending" if stage == "creating" else "Running"
    terminal = phase in ("Succeeded", "Failed")

    previous_conditions = [c for c in current.get("conditions") or () if isinstance(c, Mapping)]
    previous = {str(c.get("type")): c for c in previous_conditions}
    others = [dict(c) for c in previous_conditions if c.get("type") not in _KUBELET_OWNED]

    if phase == "Succeeded":
        initialized = _condition("Initialized", True, previous, ts, POD_COMPLETED)
    elif stage == "creating" and inits:
        initialized = _condition("Initialized", False, previous, ts, CONTAINERS_NOT_INITIALIZED,
                                 f"containers with incomplete status: {_names(inits)}")
    else:
        initialized = _condition("Initialized", True, previous, ts)

    if terminal:
        reason = POD_COMPLETED if phase == "Succeeded" else POD_FAILED
        ready = _condition("Ready", False, previous, ts, reason)
        containers_ready = _condition("ContainersReady", False, previous, ts, reason)
    elif not (stage == "running" and run.ready):
        message = f"containers with unready status: {_names(containers)}"
        ready = _condition("Ready", False, previous, ts, CONTAINERS_NOT_READY, message)
        containers_ready = _condition("ContainersReady", False, previous, ts, CONTAINERS_NOT_READY, message)
    else:
        containers_ready = _condition("ContainersReady", True, previous, ts)
        gates = _gate_messages(spec, others)
        ready = (_condition("Ready", False, previous, ts, READINESS_GATES_NOT_READY, ", ".join(gates)) if gates
                 else _condition("Ready", True, previous, ts))

    conditions = [
        *others,
        _condition("PodReadyToStartContainers", stage in ("running", "backoff"), previous, ts),
        initialized,
        ready,
        containers_ready,
        _condition("PodScheduled", True, previous, ts),
    ]
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "hostIP": host_ip,
                              "hostIPs": [{"ip": host_ip}]}
    pod_ip = host_ip if spec.get("hostNetwork") else run.ip
    if pod_ip and stage != "creating":
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = start_time
    if inits:
        status["initContainerStatuses"] = [_init_container_status(run, c, start_time) for c in inits]
    waiting_reason = "PodInitializing" if inits else "ContainerCreating"
    status["containerStatuses"] = sorted((_container_status(run, c, waiting_reason, now) for c in containers),
                                         key=lambda s: str(s["name"]))
    if current.get("qosClass"):
        status["qosClass"] = current["qosClass"]
    return status
