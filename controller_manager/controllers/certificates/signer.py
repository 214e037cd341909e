"""The CSR signing controller (``certificatesigningrequest-signing-controller``, ``csrsigning``;
``pkg/controller/certificates/signer/signer.go`` and ``cmd/kube-controller-manager/app/certificates.go``).

Guarantees:
- Signers come from the flags as upstream picks them: with none of the per-signer
  ``--cluster-signing-{kubelet-serving,kubelet-client,kube-apiserver-client,legacy-unknown}-{cert,key}-file``
  set, ``--cluster-signing-cert-file`` / ``--cluster-signing-key-file`` serve all four signers (with either
  missing: no signer, logged "Skipping CSR signer controller because no csr cert/key was specified"); with any
  per-signer file set, only the signers given files run and the shared pair must be unset ("cannot specify
  default and per controller certs at the same time" at startup). A CA that cannot be read is a startup error
  "failed to start <signer> certificate controller: ...".
- A CSR is signed only when Approved, not Denied, not Failed, without a certificate yet, and its
  ``spec.signerName`` is one of the running signers. Then the signer's rules apply (kubelet-serving and
  kube-apiserver-client-kubelet: upstream's kubelet CSR checks; kube-apiserver-client: client auth required,
  digital signature / key encipherment optional, nothing else; legacy-unknown: anything): a CSR breaking them gets
  a Failed condition, reason ``SignerValidationFailure`` with the rule's message, through ``/status``.
- The certificate's lifetime is ``--cluster-signing-duration`` (8760h) unless ``spec.expirationSeconds`` asks
  for less; never under 10 minutes. It is written to ``status.certificate`` through ``/status``. A CSR gone
  meanwhile is nothing to do; other failures retry with backoff (queue ``certificate``, 5 workers).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from controller_manager.api.meta import deep_copy, key_of, meta
from controller_manager.api.resources import CERTIFICATESIGNINGREQUESTS
from controller_manager.client.errors import NotFound
from controller_manager.controllers.certificates.authority import FileCA, SigningError, sign
from controller_manager.controllers.certificates.csr import (
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
    KUBE_APISERVER_CLIENT_SIGNER,
    KUBELET_SERVING_SIGNER,
    LEGACY_UNKNOWN_SIGNER,
    ParsedRequest,
    certificate_queue,
    decode_bytes,
    has_true_condition,
    is_approved,
    parse_csr,
    validate_kubelet_client_csr,
    validate_kubelet_serving_csr,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event

__all__ = ["DEFAULT_DURATION", "MIN_DURATION", "SIGNER_FLAGS", "CSRSigningController", "Signer", "signer_files",
           "validate_for_signer"]

Obj = Mapping[str, Any]

DEFAULT_DURATION = 8760 * 3600.0
MIN_DURATION = 10 * 60.0

# signer name -> the flag infix of its own cert/key files
SIGNER_FLAGS: dict[str, str] = {
    KUBELET_SERVING_SIGNER: "kubelet-serving",
    KUBE_APISERVER_CLIENT_KUBELET_SIGNER: "kubelet-client",
    KUBE_APISERVER_CLIENT_SIGNER: "kube-apiserver-client",
    LEGACY_UNKNOWN_SIGNER: "legacy-unknown",
}


def _api_server_client_usages(usages: Sequence[str]) -> str | None:
    has_client_auth = False
    for u in usages:
        if u in ("digital signature", "key encipherment"):
            continue
        if u == "client auth":
            has_client_auth = True
            continue
        return f"invalid usage for client certificate: {u}"
    return None if has_client_auth else "missing required usage for client certificate: client auth"


def validate_for_signer(signer_name: str, req: ParsedRequest, usages: Sequence[str]) -> str | None:
    """Why ``req`` may not be signed by ``signer_name`` (upstream's isRequestForSignerFn), or None."""
    if signer_name == KUBELET_SERVING_SIGNER:
        return validate_kubelet_serving_csr(req, usages)
    if signer_name == KUBE_APISERVER_CLIENT_KUBELET_SIGNER:
        return validate_kubelet_client_csr(req, usages)
    if signer_name == KUBE_APISERVER_CLIENT_SIGNER:
        return _api_server_client_usages(usages)
    return None  # legacy-unknown: no restriction on names or usages


def _opt(options: Mapping[str, Any], flag: str) -> str:
    value = options.get(flag.replace("-", "_"), options.get(flag, ""))
    return str(value or "")


def signer_files(options: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """signer name -> (cert file, key file) for every signer the flags start (empty: none)."""
    shared = (_opt(options, "cluster-signing-cert-file"), _opt(options, "cluster-signing-key-file"))
    specific = {name: (_opt(options, f"cluster-signing-{infix}-cert-file"),
                       _opt(options, f"cluster-signing-{infix}-key-file")) for name, infix in SIGNER_FLAGS.items()}
    any_specific = any(c or k for c, k in specific.values())
    missing_shared = not shared[0] or not shared[1]
    if missing_shared and not any_specific:
        return {}
    if not missing_shared and any_specific:
        raise ValueError("cannot specify default and per controller certs at the same time")
    if not any_specific:
        return dict.fromkeys(SIGNER_FLAGS, shared)
    return {name: files for name, files in specific.items() if files[0] or files[1]}


@dataclass
class Signer:
    """One signer name, its CA and the longest lifetime it gives."""

    name: str
    ca: FileCA
    max_ttl: float = DEFAULT_DURATION

    def duration(self, expiration_seconds: int | None) -> float:
        if expiration_seconds is None:
            return self.max_ttl
        return max(MIN_DURATION, min(float(expiration_seconds), self.max_ttl))

    def sign(self, req: ParsedRequest, usages: Sequence[str], expiration_seconds: int | None, now: float) -> bytes:
        return sign(self.ca.current(), req.request, usages, self.duration(expiration_seconds), now)


class CSRSigningController(Controller):
    """Approved CSRs of the configured signers -> ``status.certificate``. Its queue holds CSR names."""

    name: ClassVar[str] = "certificatesigningrequest-signing-controller"
    alias: ClassVar[str] = "csrsigning"
    queue_name: ClassVar[str | None] = "certificate"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext, *, now: Callable[[], float] | None = None) -> None:
        super().__init__(ctx)
        self.queue = certificate_queue(ctx.clock)
        self.now = now or ctx.clock.now
        duration = ctx.options.get("cluster_signing_duration", DEFAULT_DURATION)
        ttl = float(duration) if isinstance(duration, int | float) else DEFAULT_DURATION
        self.signers: dict[str, Signer] = {}
        for signer_name, (cert_file, key_file) in signer_files(ctx.options).items():
            try:
                self.signers[signer_name] = Signer(signer_name, FileCA(cert_file, key_file), ttl)
            except ValueError as err:
                raise ValueError(f"failed to start {signer_name} certificate controller: {err}") from err
        if not self.signers:
            self.log.info("Skipping CSR signer controller because no csr cert/key was specified")
            return
        for signer_name in SIGNER_FLAGS:
            if signer_name not in self.signers:
                self.log.info("Skipping CSR signer controller because specific files were specified for other "
                              "signers and not this one", controller=signer_name)
        self.csr_informer = ctx.informers.informer(CERTIFICATESIGNINGREQUESTS)
        self.csr_informer.add_handler(self._on_csr)

    def _on_csr(self, event: Event) -> None:
        if isinstance(event, Added | Deleted):
            self.queue.add(key_of(event.obj))
        else:
            self.queue.add(key_of(event.new))

    async def sync(self, key: str) -> Result | None:
        if not self.signers:
            return None
        cached = self.csr_informer.store.get(key)
        if cached is None:
            return None
        status = cached.get("status") or {}
        if status.get("certificate"):
            return None  # already has a certificate
        await self.handle(deep_copy(dict(cached)))
        return None

    async def handle(self, csr: dict[str, Any]) -> None:
        """Sign ``csr`` (a private copy) if it is approved, not failed, and for one of the signers."""
        if not is_approved(csr) or has_true_condition(csr, "Failed"):
            return
        spec = csr.get("spec") or {}
        signer = self.signers.get(str(spec.get("signerName") or ""))
        if signer is None:
            return
        name = meta(csr).get("name")
        try:
            req = parse_csr(decode_bytes(spec.get("request")))
        except ValueError as err:
            raise ValueError(f"unable to parse csr {name!r}: {err}") from err
        usages = [str(u) for u in spec.get("usages") or ()]
        status = csr.setdefault("status", {})
        problem = validate_for_signer(signer.name, req, usages)
        if problem is not None:
            status.setdefault("conditions", []).append({
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": problem,
                "lastUpdateTime": _rfc3339(self.now()),
            })
            try:
                await self.ctx.client.update_status(CERTIFICATESIGNINGREQUESTS, csr)
            except NotFound:
                pass
            except Exception as err:
                raise RuntimeError(f"error adding failure condition for csr: {err}") from err
            return
        expiration = spec.get("expirationSeconds")
        try:
            pem = signer.sign(req, usages, expiration if isinstance(expiration, int) else None, self.now())
        except (SigningError, ValueError) as err:
            raise RuntimeError(f"error auto signing csr: {err}") from err
        status["certificate"] = base64.b64encode(pem).decode("ascii")
        try:
            await self.ctx.client.update_status(CERTIFICATESIGNINGREQUESTS, csr)
        except NotFound:
            pass
        except Exception as err:
            raise RuntimeError(f"error updating signature for csr: {err}") from err


def _rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(int(t), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
