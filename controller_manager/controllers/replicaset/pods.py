"""Which pods a ReplicaSet looks at and deletes first: the replica manager's pure helpers
(:mod:`controller_manager.controllerutil.replicamanager.pods`), under the ReplicaSet controller's names."""

from controller_manager.controllerutil.replicamanager.pods import (
    ORPHAN_INDEX,
    SORTING_DELETION_AGE_RATIO,
    filter_claimed_pods,
    get_pods_to_delete,
    is_controlled_by,
    orphan_index,
)

__all__ = [
    "ORPHAN_INDEX",
    "SORTING_DELETION_AGE_RATIO",
    "filter_claimed_pods",
    "get_pods_to_delete",
    "is_controlled_by",
    "orphan_index",
]
