"""``GET pods/<name>/log``: a container's log, as kube-apiserver answers it with the kubelet behind it.

kube-sim's containers write nothing, so a log that can be read is empty; what a client sees otherwise is
upstream's:

- the PodLogOptions query is checked first (422 ``PodLogOptions "<pod>" is invalid``: ``tailLines`` not
  negative, ``limitBytes`` and ``sinceSeconds`` at least 1), then the pod (404) and the container
  (``LogLocation``'s validateContainer: 400 when a pod of several containers names none, or names one it
  does not have);
- a pod not yet on a node has an empty log (the API server has no kubelet to ask);
- otherwise the kubelet's rules for the container's status, each a 400 with its text (the API server passes a
  kubelet's 400 on as a BadRequest Status): no status yet, waiting (with its reason), terminated with no
  container left, ``previous`` without an earlier terminated container;
- ``follow`` keeps the stream open while the container runs, and ends it when the container stops or the pod
  is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from controller_manager.api.resources import PODS
from controller_manager.sim.apiserver import errors, request_options
from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["pod_log"]

Obj = dict[str, Any]
_LIVENESS_CHECK = 5.0
_IMAGE_WAITING = {"ErrImagePull": "image can't be pulled", "ImagePullBackOff": "trying and failing to pull image"}


def _int_option(query: Mapping[str, str], key: str) -> int | None:
    text = query.get(key)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def _check_options(query: Mapping[str, str], name: str) -> None:
    """ValidatePodLogOptions over the query's integer options."""
    causes: list[tuple[str, str, str]] = []
    tail = _int_option(query, "tailLines")
    if tail is not None and tail < 0:
        causes.append(("FieldValueInvalid", "tailLines",
                       f"tailLines: Invalid value: {tail}: must be greater than or equal to 0"))
    limit = _int_option(query, "limitBytes")
    if limit is not None and limit < 1:
        causes.append(("FieldValueInvalid", "limitBytes",
                       f"limitBytes: Invalid value: {limit}: must be greater than 0"))
    since = _int_option(query, "sinceSeconds")
    if since is not None and since < 1:
        causes.append(("FieldValueInvalid", "sinceSeconds",
                       f"sinceSeconds: Invalid value: {since}: must be greater than 0"))
    if causes:
        raise errors.invalid("", "PodLogOptions", name, causes)


def _names(spec: Mapping[str, Any], key: str) -> list[str]:
    return [str(c.get("name")) for c in spec.get(key) or [] if isinstance(c, Mapping)]


def choose_container(pod: Obj, wanted: str) -> str:
    """The pod strategy's container choice (validateContainer) for logs, exec, attach: the container named, or
    the pod's only one; 400 with upstream's messages otherwise."""
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    every = [*_names(spec, "initContainers"), *_names(spec, "containers"), *_names(spec, "ephemeralContainers")]
    if wanted:
        if wanted not in every:
            raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    containers = _names(spec, "containers")
    if len(containers) == 1:
        return containers[0]
    if not containers:
        raise errors.bad_request(f"a container name must be specified for pod {name}")
    raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                             f"[{' '.join(every)}]")


def _status_of(pod: Obj, container: str) -> Mapping[str, Any] | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if isinstance(cs, Mapping) and cs.get("name") == container:
                return cs
    return None


def _state(cs: Mapping[str, Any], key: str, which: str) -> Mapping[str, Any] | None:
    value = (cs.get(key) or {}).get(which)
    return value if isinstance(value, Mapping) else None


def _kubelet_refusal(pod: Obj, container: str, previous: bool) -> str | None:
    """The kubelet's validateContainerLogStatus: why there is no log to read, or None."""
    name = pod["metadata"]["name"]
    cs = _status_of(pod, container)
    if cs is None:
        return f'container "{container}" in pod "{name}" is not available'
    last = _state(cs, "lastState", "terminated")
    waiting, running, terminated = (_state(cs, "state", k) for k in ("waiting", "running", "terminated"))
    if previous:
        if last is None or not last.get("containerID"):
            return f'previous terminated container "{container}" in pod "{name}" not found'
        return None
    if running is not None:
        return None
    if terminated is not None:
        if terminated.get("containerID") or (last is not None and last.get("containerID")):
            return None
        return f'container "{container}" in pod "{name}" is terminated'
    if last is not None:
        return None if last.get("containerID") else f'container "{container}" in pod "{name}" is terminated'
    if waiting is not None:
        reason = str(waiting.get("reason") or "")
        return f'container "{container}" in pod "{name}" is waiting to start: {_IMAGE_WAITING.get(reason, reason)}'
    return f'container "{container}" in pod "{name}" is waiting to start - no logs yet'


def _runs(pod: Obj | None, container: str) -> bool:
    cs = _status_of(pod, container) if pod is not None else None
    return cs is not None and _state(cs, "state", "running") is not None


async def pod_log(api: ApiServer, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
    query = request.query
    follow, previous = (bool(request_options.parse_bool(query, k)) for k in ("follow", "previous"))
    _check_options(query, name)
    pod = api.get(PODS, namespace, name)
    container = choose_container(pod, query.get("container", ""))
    if (pod.get("spec") or {}).get("nodeName"):
        refusal = _kubelet_refusal(pod, container, previous)
        if refusal is not None:
            raise errors.bad_request(refusal)
    resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    await resp.prepare(request)
    if follow and not previous and _runs(pod, container):
        await _until_stopped(api, request, namespace, name, container)
    with contextlib.suppress(ConnectionResetError):
        await resp.write_eof()
    return resp


async def _until_stopped(api: ApiServer, request: web.Request, namespace: str, name: str, container: str) -> None:
    """Wait while the container runs (a followed log ends with it), the pod exists and the client listens."""
    watcher = api.watch(PODS, namespace, field_selector=f"metadata.name={name}")
    try:
        while request.transport is not None and not request.transport.is_closing():
            try:
                await asyncio.wait_for(watcher.wait_ready(), _LIVENESS_CHECK)
            except TimeoutError:
                continue
            batch = await watcher.next_batch()
            if batch is None:
                return
            for type_, obj, _raw in batch:
                if type_ == "DELETED" or (type_ in ("ADDED", "MODIFIED") and not _runs(obj, container)):
                    return
    finally:
        watcher.close()
