"""ReplicaSet status (``replica_set_utils.go``): the replica manager's status helpers
(:mod:`controller_manager.controllerutil.replicamanager.status`) with the ReplicaSet kind bound in.

Guarantees: as there; :func:`update_replica_set_status` writes through ``replicasets/status``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.client import ApiClient
from controller_manager.controllerutil.replicamanager.status import (
    REPLICA_FAILURE,
    STATUS_UPDATE_RETRIES,
    calculate_status,
    get_condition,
    min_ready_seconds,
    new_condition,
    remove_condition,
    set_condition,
    spec_replicas,
    status_unchanged,
    update_status,
)

from .controller import REPLICA_SET

__all__ = [
    "REPLICA_FAILURE",
    "STATUS_UPDATE_RETRIES",
    "calculate_status",
    "get_condition",
    "min_ready_seconds",
    "new_condition",
    "remove_condition",
    "set_condition",
    "spec_replicas",
    "status_unchanged",
    "update_replica_set_status",
]


async def update_replica_set_status(client: ApiClient, rs: Mapping[str, Any], new_status: Mapping[str, Any]
                                    ) -> Mapping[str, Any]:
    """Write ``new_status`` through the ReplicaSet's ``/status`` unless nothing changed; returns it as stored."""
    return await update_status(client, REPLICA_SET, rs, new_status)
