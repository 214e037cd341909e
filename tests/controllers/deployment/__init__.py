"""Deployment controller tests."""
