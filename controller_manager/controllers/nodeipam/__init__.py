"""kube-controller-manager's ``node-ipam-controller`` (range allocator): pod CIDRs for Nodes."""

from .controller import NodeIpamController

__all__ = ["NodeIpamController"]
