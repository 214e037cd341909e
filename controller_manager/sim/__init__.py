"""kube-sim: a simulated Kubernetes cluster (API server emulator, scheduler, kubelets) for tests and demos.

It is a separate consumer of the API: it imports only ``controller_manager.api`` and
``controller_manager.clock``, never the daemon's layers.
"""
