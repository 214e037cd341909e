"""certificates.k8s.io kinds (``pkg/registry/certificates/certificates/strategy.go``): a
CertificateSigningRequest records its requester from the request, never the body; create clears its status;
the main resource changes neither spec nor status, ``/approval`` only the approval conditions and ``/status``
the rest (see :mod:`controller_manager.sim.apiserver.certificates`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.sim.apiserver import certificates
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth import User


class CertificateSigningRequestStrategy(Strategy):
    group = "certificates.k8s.io"
    kind = "CertificateSigningRequest"

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


STRATEGIES: tuple[Strategy, ...] = (CertificateSigningRequestStrategy(),)
