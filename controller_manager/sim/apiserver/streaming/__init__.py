"""The API server's streaming subresources (``pods/exec``, ``pods/attach``, ``pods/portforward``): the
WebSocket channel protocols, SPDY tunneled in a WebSocket for port-forward, and the connect handlers that
run them against kube-sim's simulated container runtime (:mod:`controller_manager.sim.containers`)."""
