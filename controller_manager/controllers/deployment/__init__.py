"""The Deployment controller (``pkg/controller/deployment``): rolls a Deployment's pod template out through
ReplicaSets, one per template revision.

``util`` is the pure arithmetic and bookkeeping of ``deployment/util/deployment_util.go`` (annotations,
conditions, finding the new and old ReplicaSets, surge/unavailable resolution, proportional scaling); the
controller modules read the cluster, decide with ``util`` and write.
"""
