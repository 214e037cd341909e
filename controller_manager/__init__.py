"""An asyncio-native kube-controller-manager, and the simulated cluster it is tested on.

Layers (enforced by import-linter in ``make lint``)::

    manager -> controllers -> runtime (informers, workqueue, ...) -> client -> api
    sim (the simulated cluster) stands beside them and imports only ``api`` and ``clock``.
"""

__version__ = "0.1.0"
