"""The legacy ServiceAccount token controllers of upstream's ``pkg/controller/serviceaccount``: the token
controller, which fills ``kubernetes.io/service-account-token`` Secrets with signed legacy tokens and deletes
those whose ServiceAccount is gone, and the legacy token cleaner, which invalidates then deletes auto-generated
tokens unused for a long time. They share the token Secret's conventions (type, annotations), so they live in
one package; the serviceaccount-controller (``default`` accounts) shares nothing with them and stays apart."""

from controller_manager.controllers.serviceaccounttoken.jwt import LEGACY_ISSUER, TokenGenerator, load_private_key
from controller_manager.controllers.serviceaccounttoken.legacycleaner import LegacySATokenCleaner
from controller_manager.controllers.serviceaccounttoken.tokens import TokensController

__all__ = ["LEGACY_ISSUER", "LegacySATokenCleaner", "TokenGenerator", "TokensController", "load_private_key"]
