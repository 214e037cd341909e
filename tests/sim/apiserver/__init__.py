"""Tests of the kube-sim API server."""
