"""The ServiceCIDR controller: the deletion finalizer and ``Ready`` condition of networking.k8s.io/v1 ServiceCIDRs
(kube-controller-manager's ``service-cidr-controller``, ``pkg/controller/servicecidrs``).

Guarantees:
- Every ServiceCIDR not being deleted carries the ``networking.k8s.io/service-cidr-finalizer`` finalizer (added by
  a strategic merge patch) and the condition ``Ready=True`` with message ``Kubernetes Service CIDR is ready``
  and an empty reason, written by server-side apply of the status as field manager ``service-cidr-controller``
  (forced). A condition already saying the same (status, reason, message) is not rewritten. A failed status
  write is reported as a Warning event ``KubernetesServiceCIDRError`` (``The ServiceCIDR Status can not be set
  to Ready=True``) and retried.
- A ServiceCIDR being deleted keeps its finalizer while some IPAddress allocated by the API server
  (``ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io``) lies in one of its CIDRs and in no other
  ServiceCIDR, unless every CIDR of it is contained in another ServiceCIDR; meanwhile its condition is
  ``Ready=False``, reason ``Terminating``, message ``There are still IPAddresses referencing the ServiceCIDR,
  please remove them or create a new ServiceCIDR``. Once nothing holds it, the finalizer is removed, but not
  before 10 seconds after the deletion began (so the API server's allocators stop using the range first).
- A ServiceCIDR's creation re-syncs those it overlaps; an IPAddress created or deleted re-syncs the ServiceCIDRs
  that contain it. Failed syncs are retried with the default backoff (5ms doubling), dropped after 15.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import format_time, meta, parse_time
from controller_manager.api.resources import IPADDRESSES, SERVICECIDRS
from controller_manager.client.errors import NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

from .cidrs import contains_address, contains_prefix, overlaps_prefix, parse_addr, parse_prefix

__all__ = [
    "CONDITION_READY",
    "DELETION_GRACE_PERIOD",
    "SERVICE_CIDR_PROTECTION_FINALIZER",
    "ServiceCIDRsController",
    "can_delete_cidr",
    "containing_service_cidrs",
    "overlapping_service_cidrs",
]

Obj = Mapping[str, Any]

CONTROLLER_NAME = "service-cidr-controller"
SERVICE_CIDR_PROTECTION_FINALIZER = "networking.k8s.io/service-cidr-finalizer"
# Seconds a deleted ServiceCIDR keeps its finalizer after nothing holds it, so that the API server's allocators
# have seen the deletion before its range is gone.
DELETION_GRACE_PERIOD = 10.0
MAX_RETRIES = 15
CONDITION_READY = "Ready"
REASON_TERMINATING = "Terminating"
MESSAGE_READY = "Kubernetes Service CIDR is ready"
MESSAGE_TERMINATING = ("There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new "
                       "ServiceCIDR")
LABEL_IP_FAMILY = "ipaddress.kubernetes.io/ip-family"
LABEL_MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
IPALLOCATOR = "ipallocator.k8s.io"


def _name(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def _labels(obj: Obj) -> Mapping[str, Any]:
    labels = meta(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def overlapping_service_cidrs(service_cidr: Obj, service_cidrs: Sequence[Obj]) -> list[str]:
    """``overlappingServiceCIDRs``: names of the ServiceCIDRs that contain or are contained in any of its CIDRs."""
    names: dict[str, None] = {}
    for text in (service_cidr.get("spec") or {}).get("cidrs") or ():
        prefix = parse_prefix(text)
        if prefix is not None:
            names.update((_name(sc), None) for sc in overlaps_prefix(service_cidrs, prefix))
    return list(names)


def containing_service_cidrs(ip: Obj, service_cidrs: Sequence[Obj]) -> list[str]:
    """``containingServiceCIDRs``: names of the ServiceCIDRs an API-server-allocated IPAddress lies in."""
    if _labels(ip).get(LABEL_MANAGED_BY) != IPALLOCATOR:
        return []
    address = parse_addr(_name(ip))
    if address is None:
        return []
    return list(dict.fromkeys(_name(sc) for sc in contains_address(service_cidrs, address)))


def can_delete_cidr(service_cidr: Obj, service_cidrs: Sequence[Obj], ip_addresses: Sequence[Obj]) -> bool:
    """``canDeleteCIDR``: deleting it orphans no allocated IPAddress."""
    name = _name(service_cidr)
    cidrs = [str(c) for c in (service_cidr.get("spec") or {}).get("cidrs") or ()]
    has_parent = True
    for text in cidrs:
        prefix = parse_prefix(text)
        if prefix is None:
            continue
        parents = contains_prefix(service_cidrs, prefix)
        if not parents or (len(parents) == 1 and _name(parents[0]) == name):
            has_parent = False
    if has_parent:
        return True  # every address it holds is held by a larger (or equal) ServiceCIDR too

    for text in cidrs:
        prefix = parse_prefix(text)
        family = "IPv6" if prefix is not None and prefix.version == 6 else "IPv4" if prefix is not None else ""
        for ip in ip_addresses:
            labels = _labels(ip)
            if labels.get(LABEL_IP_FAMILY) != family or labels.get(LABEL_MANAGED_BY) != IPALLOCATOR:
                continue
            address = parse_addr(_name(ip))
            if address is None:
                continue  # the API server validates IPAddress names: cannot happen
            holders = contains_address(service_cidrs, address)
            if len(holders) == 1 and _name(holders[0]) == name:
                return False
    return True


def find_condition(service_cidr: Obj, condition_type: str) -> Mapping[str, Any] | None:
    status = service_cidr.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return condition
    return None


class ServiceCIDRsController(Controller):
    """ServiceCIDRs: finalizer and Ready condition. Its queue holds ServiceCIDR names."""

    name: ClassVar[str] = "service-cidr-controller"
    alias: ClassVar[str] = "service-cidr-controller"
    queue_name: ClassVar[str | None] = "ipaddresses"
    max_retries: ClassVar[int | None] = MAX_RETRIES
    workers_option: ClassVar[str | None] = None
    default_workers: ClassVar[int] = 5  # upstream runs 5 workers, with no flag for it

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.recorder = ctx.events.recorder(CONTROLLER_NAME)
        self.cidr_informer = ctx.informers.informer(SERVICECIDRS)
        self.ip_informer = ctx.informers.informer(IPADDRESSES)
        self.cidr_informer.add_handler(self._on_service_cidr)
        self.ip_informer.add_handler(self._on_ip_address)

    # --- handlers ---------------------------------------------------------------------------------

    def _on_service_cidr(self, event: Event) -> None:
        if isinstance(event, Added):
            self.queue.add(_name(event.obj))
            # A new range may unblock (or take over) the deletion of the ranges it overlaps.
            for name in overlapping_service_cidrs(event.obj, self.cidr_informer.store.list()):
                self.queue.add(name)
        elif isinstance(event, Updated):
            self.queue.add(_name(event.new))
        else:
            self.queue.add(_name(event.obj))

    def _on_ip_address(self, event: Event) -> None:
        if isinstance(event, Updated):
            return  # an IPAddress's name (its address) never changes
        if isinstance(event, (Added, Deleted)):
            for name in containing_service_cidrs(event.obj, self.cidr_informer.store.list()):
                self.queue.add(name)

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        service_cidr = self.cidr_informer.store.get(key)
        if service_cidr is None:
            return None  # gone
        return await self.sync_service_cidr(service_cidr, self.cidr_informer.store.list(),
                                            self.ip_informer.store.list())

    async def sync_service_cidr(self, service_cidr: Obj, service_cidrs: Sequence[Obj],
                                ip_addresses: Sequence[Obj]) -> Result | None:
        """One ServiceCIDR against the cached ServiceCIDRs and IPAddresses (upstream's ``sync``)."""
        deleted_at = parse_time(meta(service_cidr).get("deletionTimestamp"))
        if deleted_at is not None:
            if not can_delete_cidr(service_cidr, service_cidrs, ip_addresses):
                # Re-evaluated when an IPAddress or ServiceCIDR event concerns it.
                await self._update_condition_if_needed(service_cidr, "False", REASON_TERMINATING,
                                                       MESSAGE_TERMINATING)
                return None
            remaining = DELETION_GRACE_PERIOD - (self.ctx.clock.now() - deleted_at)
            if remaining > 0:
                return Result(requeue_after=remaining)
            await self._remove_finalizer_if_needed(service_cidr)
            return None

        await self._add_finalizer_if_needed(service_cidr)
        try:
            await self._update_condition_if_needed(service_cidr, "True", "", MESSAGE_READY)
        except Exception as err:
            self.log.info("error updating default ServiceCIDR status", error=str(err))
            self.recorder.event(service_cidr, "Warning", "KubernetesServiceCIDRError",
                                "The ServiceCIDR Status can not be set to Ready=True", resource=SERVICECIDRS)
            raise
        return None

    async def _add_finalizer_if_needed(self, service_cidr: Obj) -> None:
        if SERVICE_CIDR_PROTECTION_FINALIZER in (meta(service_cidr).get("finalizers") or ()):
            return
        patch = {"metadata": {"finalizers": [SERVICE_CIDR_PROTECTION_FINALIZER]}}
        try:
            await self.ctx.client.patch(SERVICECIDRS, _name(service_cidr), patch, patch_type="strategic")
        except NotFound:
            return
        self.log.debug("Added protection finalizer to ServiceCIDR", ServiceCIDR=_name(service_cidr))

    async def _remove_finalizer_if_needed(self, service_cidr: Obj) -> None:
        if SERVICE_CIDR_PROTECTION_FINALIZER not in (meta(service_cidr).get("finalizers") or ()):
            return
        patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [SERVICE_CIDR_PROTECTION_FINALIZER]}}
        try:
            await self.ctx.client.patch(SERVICECIDRS, _name(service_cidr), patch, patch_type="strategic")
        except NotFound:
            return
        self.log.debug("Removed protection finalizer from ServiceCIDRs", ServiceCIDR=_name(service_cidr))

    async def _update_condition_if_needed(self, service_cidr: Obj, status: str, reason: str, message: str) -> None:
        current = find_condition(service_cidr, CONDITION_READY)
        if (current is not None and current.get("status") == status and (current.get("reason") or "") == reason
                and (current.get("message") or "") == message):
            return
        self.log.debug("Updating ServiceCIDR condition", ServiceCIDR=_name(service_cidr),
                       conditionType=CONDITION_READY, newStatus=status, newReason=reason)
        condition = {"type": CONDITION_READY, "status": status, "reason": reason, "message": message,
                     "lastTransitionTime": format_time(self.ctx.clock.now())}
        apply = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                 "metadata": {"name": _name(service_cidr)}, "status": {"conditions": [condition]}}
        await self.ctx.client.apply(SERVICECIDRS, apply, field_manager=CONTROLLER_NAME, force=True,
                                    subresource="status")
