"""What the certificate controllers share (upstream's ``pkg/controller/certificates/certificate_controller.go``
and ``certificate_controller_utils.go``, and the CSR helpers of ``pkg/apis/certificates/v1/helpers.go``).

Guarantees:
- :func:`parse_csr` reads ``spec.request`` (base64 of PEM, as the API serves it) into an x509 request; anything
  but one ``CERTIFICATE REQUEST`` PEM block is :class:`ValueError` ("PEM block type must be CERTIFICATE REQUEST").
- :func:`validate_kubelet_client_csr` / :func:`validate_kubelet_serving_csr` return upstream's error message
  (first failing rule, in upstream's order) or None.
- :func:`is_approved`, :func:`approval` and :func:`has_true_condition` read ``status.conditions`` as upstream's
  ``IsCertificateRequestApproved`` / ``GetCertApprovalCondition`` / ``HasTrueCondition`` do.
- :func:`certificate_queue` is upstream's queue for these controllers: named ``certificate``, exponential
  backoff from 200 ms to 1000 s per key, max'd with 10 qps / burst 100.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from controller_manager.clock import Clock
from controller_manager.runtime.workqueue import RateLimitingQueue
from controller_manager.runtime.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)

__all__ = [
    "KUBELET_SERVING_SIGNER", "KUBE_APISERVER_CLIENT_KUBELET_SIGNER", "KUBE_APISERVER_CLIENT_SIGNER",
    "LEGACY_UNKNOWN_SIGNER", "ParsedRequest", "approval", "certificate_queue", "decode_bytes", "has_true_condition",
    "is_approved", "parse_csr", "validate_kubelet_client_csr", "validate_kubelet_serving_csr",
]

Obj = Mapping[str, Any]

KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
KUBE_APISERVER_CLIENT_KUBELET_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBE_APISERVER_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"

_KUBELET_CLIENT_USAGES = frozenset({"digital signature", "key encipherment", "client auth"})
_KUBELET_CLIENT_USAGES_NO_RSA = frozenset({"digital signature", "client auth"})
_KUBELET_SERVING_USAGES = frozenset({"digital signature", "key encipherment", "server auth"})
_KUBELET_SERVING_USAGES_NO_RSA = frozenset({"digital signature", "server auth"})

_ORG_NOT_NODES = "subject organization is not system:nodes"
_CN_NOT_NODE = "subject common name does not begin with system:node:"


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """An x509 certificate request and the parts of it the rules look at."""

    request: x509.CertificateSigningRequest
    common_name: str
    organizations: tuple[str, ...]
    dns_names: tuple[str, ...]
    ip_addresses: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, ...]
    email_addresses: tuple[str, ...]
    uris: tuple[str, ...]


def decode_bytes(value: Any) -> bytes:
    """A ``[]byte`` field as JSON carries it (base64); empty for anything else."""
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        return b""


def _pem_block(data: bytes) -> tuple[str, bytes] | None:
    """The first PEM block of ``data``: its type and the whole block's text."""
    start = data.find(b"-----BEGIN ")
    if start < 0:
        return None
    line_end = data.find(b"-----", start + 11)
    if line_end < 0:
        return None
    kind = data[start + 11:line_end].decode("ascii", "replace")
    end_marker = b"-----END " + kind.encode() + b"-----"
    end = data.find(end_marker, line_end)
    if end < 0:
        return None
    return kind, data[start:end + len(end_marker)]


def parse_csr(pem_data: bytes) -> ParsedRequest:
    """``ParseCSR``: the request in the first PEM block, which must be a CERTIFICATE REQUEST."""
    block = _pem_block(pem_data)
    if block is None or block[0] != "CERTIFICATE REQUEST":
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    request = x509.load_pem_x509_csr(block[1])
    subject = request.subject
    cns = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = tuple(str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    try:
        san = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = tuple(san.get_values_for_type(x509.DNSName))
        ips = tuple(san.get_values_for_type(x509.IPAddress))
        emails = tuple(san.get_values_for_type(x509.RFC822Name))
        uris = tuple(san.get_values_for_type(x509.UniformResourceIdentifier))
    except x509.ExtensionNotFound:
        dns, ips, emails, uris = (), (), (), ()
    return ParsedRequest(request, str(cns[0].value) if cns else "", orgs, dns,
                         tuple(ip for ip in ips if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address)),
                         emails, uris)


def _usages_did_not_match(required: Iterable[str]) -> str:
    return f"usages did not match [{' '.join(sorted(required))}]"


def validate_kubelet_client_csr(req: ParsedRequest, usages: Iterable[str]) -> str | None:
    """``ValidateKubeletClientCSR``: why ``req`` is not a kubelet client certificate request, or None."""
    if req.organizations != ("system:nodes",):
        return _ORG_NOT_NODES
    if req.dns_names:
        return "DNS subjectAltNames are not allowed"
    if req.email_addresses:
        return "Email subjectAltNames are not allowed"
    if req.ip_addresses:
        return "IP subjectAltNames are not allowed"
    if req.uris:
        return "URI subjectAltNames are not allowed"
    if not req.common_name.startswith("system:node:"):
        return _CN_NOT_NODE
    wanted = frozenset(usages)
    if wanted not in (_KUBELET_CLIENT_USAGES, _KUBELET_CLIENT_USAGES_NO_RSA):
        return _usages_did_not_match(_KUBELET_CLIENT_USAGES)
    return None


def validate_kubelet_serving_csr(req: ParsedRequest, usages: Iterable[str]) -> str | None:
    """``ValidateKubeletServingCSR``: why ``req`` is not a kubelet serving certificate request, or None."""
    wanted = frozenset(usages)
    if wanted not in (_KUBELET_SERVING_USAGES, _KUBELET_SERVING_USAGES_NO_RSA):
        return _usages_did_not_match(_KUBELET_SERVING_USAGES)
    if req.organizations != ("system:nodes",):
        return _ORG_NOT_NODES
    if not req.common_name.startswith("system:node:"):
        return _CN_NOT_NODE
    if not req.dns_names and not req.ip_addresses:
        return "DNS or IP subjectAltName is required"
    if req.email_addresses:
        return "Email subjectAltNames are not allowed"
    if req.uris:
        return "URI subjectAltNames are not allowed"
    return None


def _conditions(csr: Obj) -> list[Mapping[str, Any]]:
    status = csr.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in conditions or () if isinstance(c, Mapping)]


def approval(csr: Obj) -> tuple[bool, bool]:
    """``GetCertApprovalCondition``: (approved, denied) from any Approved / Denied condition."""
    approved = denied = False
    for c in _conditions(csr):
        if c.get("type") == "Approved":
            approved = True
        elif c.get("type") == "Denied":
            denied = True
    return approved, denied


def is_approved(csr: Obj) -> bool:
    """``IsCertificateRequestApproved``: approved and not denied."""
    approved, denied = approval(csr)
    return approved and not denied


def has_true_condition(csr: Obj, kind: str) -> bool:
    """``HasTrueCondition``: a condition of ``kind`` whose status is True (or empty, as upstream defaults it)."""
    return any(c.get("type") == kind and c.get("status") in ("True", "", None) for c in _conditions(csr))


def certificate_queue(clock: Clock) -> RateLimitingQueue[str]:
    """Upstream's queue for a certificate controller (``certificate``; 200 ms..1000 s backoff, 10 qps)."""
    limiter = MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.2, 1000.0),
                               BucketRateLimiter(qps=10.0, burst=100, clock=clock))
    return RateLimitingQueue("certificate", rate_limiter=limiter, clock=clock)
