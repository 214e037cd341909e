"""The daemon: flags, the controller registry, HTTPS serving of metrics and health, and ``main()``.

Modules: ``options`` (flags as kube-controller-manager names them), ``registry`` (every upstream controller
name, alias and default, joined with the implemented Controller classes; ``--controllers`` parsing),
``serving``/``auth``/``health``/``certs`` (the secure endpoint), ``logging``, ``leader`` (the Lease
campaign), ``app`` (the lifecycle) and ``main`` (the ``controller-manager`` console script).
"""
