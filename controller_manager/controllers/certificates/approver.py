"""The CSR approving controller (``certificatesigningrequest-approving-controller``, ``csrapproving``;
``pkg/controller/certificates/approver/sarapprove.go``).

Guarantees:
- Only CSRs without a certificate and neither Approved nor Denied are looked at. A CSR for the
  ``kubernetes.io/kube-apiserver-client-kubelet`` signer passing upstream's kubelet client checks is recognised
  as ``selfnodeclient`` (first, when ``spec.username`` equals the request's common name) and ``nodeclient``.
- For each recognised kind in that order, a SubjectAccessReview asks whether the requester (``spec.username``,
  ``uid``, ``groups``, ``extra``) may ``create`` ``certificates.k8s.io/certificatesigningrequests/<kind>``
  (version ``*``). The first allowed adds an Approved condition (reason ``AutoApproved``, upstream's message)
  through ``/approval``. None allowed: retried with backoff (upstream's ignorable error, logged at debug).
- A request that cannot be parsed is retried with backoff; queue ``certificate``, 5 workers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from controller_manager.api.meta import deep_copy, key_of, meta
from controller_manager.api.resources import CERTIFICATESIGNINGREQUESTS, SUBJECTACCESSREVIEWS
from controller_manager.controllers.certificates.csr import (
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
    ParsedRequest,
    approval,
    certificate_queue,
    decode_bytes,
    parse_csr,
    validate_kubelet_client_csr,
)
from controller_manager.runtime.controller import RATE_LIMITED, Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event

__all__ = ["RECOGNIZERS", "CSRApprovingController", "Recognizer", "is_node_client_cert", "is_self_node_client_cert"]

Obj = Mapping[str, Any]


def is_node_client_cert(csr: Obj, req: ParsedRequest) -> bool:
    spec = csr.get("spec") or {}
    if spec.get("signerName") != KUBE_APISERVER_CLIENT_KUBELET_SIGNER:
        return False
    return validate_kubelet_client_csr(req, [str(u) for u in spec.get("usages") or ()]) is None


def is_self_node_client_cert(csr: Obj, req: ParsedRequest) -> bool:
    if (csr.get("spec") or {}).get("username") != req.common_name:
        return False
    return is_node_client_cert(csr, req)


@dataclass(frozen=True, slots=True)
class Recognizer:
    recognize: Callable[[Obj, ParsedRequest], bool]
    subresource: str
    message: str


RECOGNIZERS: tuple[Recognizer, ...] = (
    Recognizer(is_self_node_client_cert, "selfnodeclient",
               "Auto approving self kubelet client certificate after SubjectAccessReview."),
    Recognizer(is_node_client_cert, "nodeclient",
               "Auto approving kubelet client certificate after SubjectAccessReview."),
)


class CSRApprovingController(Controller):
    """Kubelet client CSRs -> Approved, when a SubjectAccessReview allows it. Its queue holds CSR names."""

    name: ClassVar[str] = "certificatesigningrequest-approving-controller"
    alias: ClassVar[str] = "csrapproving"
    queue_name: ClassVar[str | None] = "certificate"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.queue = certificate_queue(ctx.clock)
        self.csr_informer = ctx.informers.informer(CERTIFICATESIGNINGREQUESTS)
        self.csr_informer.add_handler(self._on_csr)

    def _on_csr(self, event: Event) -> None:
        if isinstance(event, Added | Deleted):
            self.queue.add(key_of(event.obj))
        else:
            self.queue.add(key_of(event.new))

    async def sync(self, key: str) -> Result | None:
        cached = self.csr_informer.store.get(key)
        if cached is None or (cached.get("status") or {}).get("certificate"):
            return None
        return await self.handle(deep_copy(dict(cached)))

    async def handle(self, csr: dict[str, Any]) -> Result | None:
        if any(approval(csr)):
            return None
        spec = csr.get("spec") or {}
        name = meta(csr).get("name")
        try:
            req = parse_csr(decode_bytes(spec.get("request")))
        except ValueError as err:
            raise ValueError(f"unable to parse csr {name!r}: {err}") from err
        tried = []
        for r in RECOGNIZERS:
            if not r.recognize(csr, req):
                continue
            tried.append(r.subresource)
            if await self.authorize(csr, r.subresource):
                csr.setdefault("status", {}).setdefault("conditions", []).append(
                    {"type": "Approved", "status": "True", "reason": "AutoApproved", "message": r.message})
                try:
                    await self.ctx.client.update_subresource(CERTIFICATESIGNINGREQUESTS, csr, "approval")
                except Exception as err:
                    raise RuntimeError(f"error updating approval for csr: {err}") from err
                return None
        if tried:
            self.log.debug("ignorable error", error=f"recognized csr {name!r} as [{' '.join(tried)}] but subject "
                           "access review was not approved")
            return RATE_LIMITED
        return None

    async def authorize(self, csr: Obj, subresource: str) -> bool:
        """Whether the CSR's requester may ``create`` ``certificatesigningrequests/<subresource>``."""
        spec = csr.get("spec") or {}
        review_spec: dict[str, Any] = {
            "user": spec.get("username", ""),
            "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests",
                                   "verb": "create", "subresource": subresource, "version": "*"},
        }
        if spec.get("uid"):
            review_spec["uid"] = spec["uid"]
        if spec.get("groups"):
            review_spec["groups"] = list(spec["groups"])
        if spec.get("extra"):
            review_spec["extra"] = dict(spec["extra"])
        review = await self.ctx.client.create(SUBJECTACCESSREVIEWS, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": review_spec})
        return bool((review.get("status") or {}).get("allowed"))
