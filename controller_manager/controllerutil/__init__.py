"""kube-controller-manager's shared controller helpers (upstream's ``pkg/controller``), above the runtime.

Where ``runtime`` is client-go in miniature (informers, work queues, the runner, events, leader election),
this package holds what workload controllers share on top of it: expectations, controller references
(adoption, release, resolving an owner), pod creation and deletion, pod ranking and the ReplicaSet/Deployment
helpers, the per-object selector cache, and the owner-aware event handler.

It imports ``runtime``, ``client`` and ``api``; ``runtime`` never imports it (an import-linter contract).
"""
