"""certificates.k8s.io kinds (``pkg/registry/certificates/certificates/strategy.go``): a
CertificateSigningRequest records its requester from the request, never the body; create clears its status;
the main resource changes neither spec nor status, ``/approval`` only the approval conditions and ``/status``
the rest (see :mod:`controller_manager.sim.apiserver.certificates`). A ClusterTrustBundle's name rule
depends on its signer (:mod:`controller_manager.sim.apiserver.cluster_trust_bundles`). A PodCertificateRequest's
spec is immutable and its status terminal once issued, denied or failed
(:mod:`controller_manager.sim.apiserver.pod_certificate_requests`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.sim.apiserver import certificates, cluster_trust_bundles, pod_certificate_requests
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth import User


class CertificateSigningRequestStrategy(Strategy):
    group = "certificates.k8s.io"
    kind = "CertificateSigningRequest"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return certificates.validate(obj, old)

    def on_create_request(self, obj: Obj, user: User) -> Obj:
        return certificates.with_requester(obj, user.as_user_info())

    def prepare_for_create(self, w: Write, obj: Obj) -> Obj:
        return certificates.prepare(super().prepare_for_create(w, obj), None, None, w.now())

    def keep_server_fields(self, w: Write, new: Obj, old: Obj) -> Obj:
        if w.subresource == "approval":  # writes status (conditions), as /status does
            return self.status_update(new, old)
        return super().keep_server_fields(w, new, old)

    def prepare_for_update(self, w: Write, new: Obj, old: Obj) -> Obj:
        return certificates.prepare(super().prepare_for_update(w, new, old), old, w.subresource, w.now())


class ClusterTrustBundleStrategy(Strategy):
    group = "certificates.k8s.io"
    kind = "ClusterTrustBundle"

    def name_rule(self, obj: Obj) -> NameFn:  # (its name's form depends on its signer)
        spec = obj.get("spec")
        signer = spec.get("signerName") if isinstance(spec, dict) else None
        rule: NameFn = cluster_trust_bundles.name_errors(str(signer or ""))
        return rule

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return cluster_trust_bundles.validate(obj, old)


class PodCertificateRequestStrategy(Strategy):
    group = "certificates.k8s.io"
    kind = "PodCertificateRequest"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return pod_certificate_requests.validate(obj, old)

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        return pod_certificate_requests.status_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (CertificateSigningRequestStrategy(), ClusterTrustBundleStrategy(),
                                    PodCertificateRequestStrategy())
