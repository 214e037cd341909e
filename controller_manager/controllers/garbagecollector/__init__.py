"""The garbage collector: an owner->dependents graph from every resource's ownerReferences, and the workers
that delete what no live owner owns (background, foreground) and orphan dependents when asked."""

from .garbagecollector import GarbageCollector

__all__ = ["GarbageCollector"]
