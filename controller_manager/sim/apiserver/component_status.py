"""``componentstatuses`` (core/v1, deprecated since 1.19): the control plane's health as kube-apiserver reports it
(``pkg/registry/core/componentstatus``), computed on each read and never stored.

Guarantees:
- One ComponentStatus per component the server checks: ``controller-manager`` and ``scheduler`` (an HTTPS GET of
  ``/healthz`` on their default secure ports, 10257 and 10259, certificate unchecked, as upstream's
  ``serversToValidate`` does; the in-process scheduler of a SimCluster answers for itself) and ``etcd-0`` (kube-sim's
  own store, always reachable: ``ok``).
- Each carries one ``Healthy`` condition: ``True`` with the body when the probe answered 2xx/3xx, ``False`` with the
  body on another code, and ``False`` with the request's error as the message when it could not connect (the HTTP
  prober's failure output: ``Get "https://127.0.0.1:10257/healthz": dial tcp 127.0.0.1:10257: connect: connection
  refused``), so ``kubectl get cs`` shows it Unhealthy with that message.
- A list is filtered by label and field selectors (``metadata.name``) as upstream's predicate does; items come in
  name order (upstream's come in the order the probes finish). A get of an unknown name is upstream's plain error:
  500 with an empty reason and ``Component not found: <name>``.
- Every answer carries the deprecation warning ``v1 ComponentStatus is deprecated in v1.19+``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from controller_manager.api import selectors
from controller_manager.api.fields import parse_field_selector
from controller_manager.api.resources import COMPONENTSTATUSES
from controller_manager.sim.apiserver import errors, fieldsel

Obj = dict[str, Any]

DEPRECATION_WARNING = "v1 ComponentStatus is deprecated in v1.19+"
PROBE_TIMEOUT = 20.0  # upstream's probeTimeOut
CONTROLLER_MANAGER_URL = "https://127.0.0.1:10257/healthz"  # ports.KubeControllerManagerPort
SCHEDULER_URL = "https://127.0.0.1:10259/healthz"  # DefaultKubeSchedulerPort


@dataclass(frozen=True)
class Health:
    """A probe's outcome: the condition's status ("True", "False", "Unknown"), message and error."""

    status: str
    message: str = ""
    error: str = ""


Probe = Callable[[], Awaitable[Health]]

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def _dial_error(url: str, exc: BaseException) -> str:
    """The Go HTTP client's wording for a failed GET, as the prober's error carries it."""
    parts = urlsplit(url)
    address = f"{parts.hostname}:{parts.port}"
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, ConnectionRefusedError):
        return f'Get "{url}": dial tcp {address}: connect: connection refused'
    if isinstance(exc, TimeoutError):
        return f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    return f'Get "{url}": {exc}'


def http_probe(url: str, timeout: float = PROBE_TIMEOUT) -> Probe:
    """upstream's HttpServer.DoServerCheck: a GET of ``url`` (TLS unverified)."""

    async def probe() -> Health:
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session, \
                    session.get(url, ssl=_INSECURE) as resp:
                body = await resp.text(errors="replace")
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            # the HTTP prober reports a failed request as a failed probe whose output is the error
            return Health("False", _dial_error(url, e))
        return Health("True" if 200 <= resp.status < 400 else "False", body)

    return probe


async def store_probe() -> Health:
    """The storage backend's check: kube-sim's store is in memory and always answers."""
    return Health("True", "ok")


def default_probes() -> dict[str, Probe]:
    """What a kube-apiserver with one storage backend checks (storage_core's serversToValidate)."""
    return {"controller-manager": http_probe(CONTROLLER_MANAGER_URL), "scheduler": http_probe(SCHEDULER_URL),
            "etcd-0": store_probe}


def _object(name: str, health: Health) -> Obj:
    condition: Obj = {"type": "Healthy", "status": health.status}
    if health.message:
        condition["message"] = health.message
    if health.error:
        condition["error"] = health.error
    return {"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name}, "conditions": [condition]}


async def get(probes: Mapping[str, Probe], name: str) -> Obj:
    probe = probes.get(name)
    if probe is None:  # a plain error in upstream's REST, so the generic 500 with no reason
        raise errors.StatusError({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": f"Component not found: {name}", "code": 500})
    return _object(name, await probe())


def _matcher(label_selector: str | None, field_selector: str | None) -> Callable[[Obj], bool]:
    try:
        labels = selectors.parse(label_selector) if label_selector else None
        fields = fieldsel.compile_selector(COMPONENTSTATUSES, parse_field_selector(field_selector or ""))
    except selectors.InvalidSelector as e:
        raise errors.bad_request(str(e)) from None

    def matches(obj: Obj) -> bool:
        if labels is not None and not labels.matches(obj["metadata"].get("labels") or {}):
            return False
        return fields is None or fields(obj)

    return matches


async def list_statuses(probes: Mapping[str, Probe], label_selector: str | None, field_selector: str | None) -> Obj:
    matches = _matcher(label_selector, field_selector)
    names = sorted(probes)
    results = await asyncio.gather(*(probes[n]() for n in names))
    items = [obj for obj in (_object(n, h) for n, h in zip(names, results, strict=True)) if matches(obj)]
    return {"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items}
