"""End-to-end tests: kube-sim and controller-manager as real processes, driven by kubectl and API clients."""
