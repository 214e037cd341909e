"""Tests of the simulated cluster."""
