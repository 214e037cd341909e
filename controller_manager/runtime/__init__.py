"""The daemon's runtime (client-go in miniature): informers, work queues, the runner, events, leader election.

Everything here sits between the controllers and the API client: it imports ``client`` and ``api`` and is
imported by ``controllerutil``, ``controllers`` and ``manager``, never the other way round (kube-controller-manager's
shared helpers live in ``controllerutil``).
"""
