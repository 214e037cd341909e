"""The TTL-after-finished controller (``ttl-after-finished-controller``): deletes finished Jobs after their TTL."""

from controller_manager.controllers.ttlafterfinished.controller import TTLAfterFinishedController

__all__ = ["TTLAfterFinishedController"]
