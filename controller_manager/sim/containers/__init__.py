"""kube-sim's simulated container runtime: what exec, attach and port-forward reach inside a pod.

:mod:`filesystem` is a container's in-memory file tree, :mod:`setup` what the kubelet gives a container
(environment, volumes, /etc files), :mod:`shell` the commands it can run, and :mod:`runtime` the containers of
every simulated node, made on first use.
"""
