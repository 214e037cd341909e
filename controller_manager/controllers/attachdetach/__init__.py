"""kube-controller-manager's ``persistentvolume-attach-detach-controller`` (CSI volumes)."""

from .controller import AttachDetachController

__all__ = ["AttachDetachController"]
