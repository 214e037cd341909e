"""The sharder: assigns root objects to shard members (``--sharding=true``; runs on the leader)."""

from controller_manager.controllers.sharder.controller import Sharder

__all__ = ["Sharder"]
