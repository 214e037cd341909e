"""kube-controller-manager's ``resourcequota-controller``: ResourceQuota ``status.hard`` and ``status.used``."""

from .controller import ResourceQuotaController

__all__ = ["ResourceQuotaController"]
