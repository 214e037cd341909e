"""The service account controller (``serviceaccount-controller``): every active namespace has a ``default``
ServiceAccount."""

from controller_manager.controllers.serviceaccount.controller import (
    DEFAULT_SERVICE_ACCOUNTS,
    ServiceAccountsController,
)

__all__ = ["DEFAULT_SERVICE_ACCOUNTS", "ServiceAccountsController"]
