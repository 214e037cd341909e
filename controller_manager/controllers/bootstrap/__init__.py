"""The bootstrap token controllers (``pkg/controller/bootstrap``): the bootstrap signer, which signs
``kube-public/cluster-info`` with bootstrap tokens, and the token cleaner, which deletes expired ones. Both are
off by default, as upstream. They share the bootstrap token helpers (:mod:`.secrets`, :mod:`.jws`), as upstream's
package does, so they live in one package."""

from controller_manager.controllers.bootstrap.jws import compute_detached_signature, detached_token_is_valid
from controller_manager.controllers.bootstrap.signer import BootstrapSigner
from controller_manager.controllers.bootstrap.tokencleaner import TokenCleaner

__all__ = ["BootstrapSigner", "TokenCleaner", "compute_detached_signature", "detached_token_is_valid"]
