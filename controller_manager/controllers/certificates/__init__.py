"""The certificate controllers (``pkg/controller/certificates/``): signing (:mod:`.signer`), approving
(:mod:`.approver`) and cleaning (:mod:`.cleaner`) CertificateSigningRequests; shared rules in :mod:`.csr`; and
cleaning PodCertificateRequests (:mod:`.pcrcleaner`)."""

from controller_manager.controllers.certificates.approver import CSRApprovingController
from controller_manager.controllers.certificates.cleaner import CSRCleanerController
from controller_manager.controllers.certificates.pcrcleaner import PCRCleanerController
from controller_manager.controllers.certificates.signer import CSRSigningController

__all__ = ["CSRApprovingController", "CSRCleanerController", "CSRSigningController", "PCRCleanerController"]
