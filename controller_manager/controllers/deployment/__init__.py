"""The Deployment controller (``pkg/controller/deployment``): rolls a Deployment's pod template out through
ReplicaSets, one per template revision.

The ``util_*`` modules are the pure arithmetic and bookkeeping of ``deployment/util/deployment_util.go``, one
module per concept (every name is upstream's function in snake_case; nothing mutates an argument):

- ``util_annotations``: revision / revision-history / desired-replicas / max-replicas annotations and which
  Deployment annotations a ReplicaSet never inherits.
- ``util_conditions``: DeploymentCondition builders, condition types, reasons and message texts.
- ``util_replicasets``: the pod-template-hash label, template equality ignoring it, finding the new and old
  ReplicaSets, orderings.
- ``util_strategy``: spec.replicas, strategy type, maxSurge/maxUnavailable resolution (ResolveFenceposts).
- ``util_rollout``: replica counting, sizing the new ReplicaSet, saturation, proportional scaling,
  complete / progressing / timed-out judgements.

The controller modules read the cluster, decide with these and write.
"""
