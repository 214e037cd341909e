"""The SELinux warning controller: events and a metric for pods that may share a volume with different SELinux
labels or change policies."""

from controller_manager.controllers.selinuxwarning.controller import SELinuxWarningController

__all__ = ["SELinuxWarningController"]
