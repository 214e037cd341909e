"""Shared informers: one list+watch per resource type, a cache with indexes, typed events for handlers.

Public names (see docs/internals.md, "runtime/"): ``SharedInformerFactory``, ``SharedInformer``, ``Store``,
the events ``Added``/``Updated``/``Deleted``, the built-in index names, and the transforms.
"""

from .events import Added, Deleted, Event, Handler, Updated
from .factory import SharedInformerFactory
from .informer import SharedInformer
from .reflector import Reflector, resource_name
from .store import CONTROLLER_UID_INDEX, NAMESPACE_INDEX, NODE_NAME_INDEX, IndexFunc, Store, UnknownIndex
from .transform import Sharer, Transform, compose, default_transform, share, strip_managed_fields

__all__ = [
    "CONTROLLER_UID_INDEX",
    "NAMESPACE_INDEX",
    "NODE_NAME_INDEX",
    "Added",
    "Deleted",
    "Event",
    "Handler",
    "IndexFunc",
    "Reflector",
    "SharedInformer",
    "SharedInformerFactory",
    "Sharer",
    "Store",
    "Transform",
    "UnknownIndex",
    "Updated",
    "compose",
    "default_transform",
    "resource_name",
    "share",
    "strip_managed_fields",
]
