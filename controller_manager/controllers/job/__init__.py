"""The Job controller (``job-controller``): see :mod:`.controller` for its guarantees."""

from .controller import JobController

__all__ = ["JobController"]
