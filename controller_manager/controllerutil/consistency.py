"""Read-your-own-writes for controllers (upstream's ``pkg/controller/util/consistency``, KEP-5647 "stale
controller mitigation", on by default since 1.36 for the ReplicaSet, Job, StatefulSet and DaemonSet
controllers through the ``StaleControllerConsistency*`` feature gates).

A sync writes (say) a ReplicaSet's status and records the resourceVersion the API server answered with,
under the ReplicaSet's key. The next sync of that key first asks :meth:`ConsistencyStore.ensure_ready`: if an
informer it reads has not yet applied an event at least that new, the sync would act on its own stale copy
(and its status write would fail with 409 Conflict), so it is skipped and requeued with backoff instead.

Guarantees:
- :meth:`wrote_at` keeps, per owner key and resource, the highest resourceVersion written; a different owner
  UID (the owner deleted and recreated) starts a fresh record.
- :meth:`ensure_ready` returns at once when nothing is recorded; otherwise it compares each recorded version
  with its informer's ``last_sync_resource_version`` (the newest event applied to the store), raising
  :class:`StaleCache` while one is behind, and forgets the record once every one has caught up. An informer
  that has no version yet, and versions that are not decimal integers, never block.
- :meth:`clear` forgets an owner (only when its UID matches, if one is given).
- :meth:`record` is :meth:`wrote_at` for an owner object and the object a write returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import key_of, meta
from controller_manager.api.resource_version import compare_resource_versions

__all__ = ["ConsistencyStore", "StaleCache", "compare_resource_versions"]


class StaleCache(Exception):
    """An informer has not yet seen this controller's last write for the owner being synced."""

    def __init__(self, read: str, wrote: str, resource: str) -> None:
        super().__init__(f"read version: {read} is not as new as written version: {wrote} for group resource "
                         f"{resource}")
        self.read = read
        self.wrote = wrote
        self.resource = resource


@dataclass
class _Record:
    uid: str
    versions: dict[str, str] = field(default_factory=dict)


class ConsistencyStore:
    """Written resourceVersions by owner key, checked against the informers' progress."""

    def __init__(self, read_versions: Mapping[str, Callable[[], str]]) -> None:
        # resource name (as given to wrote_at) -> the informer's last applied resourceVersion
        self._read = dict(read_versions)
        self._writes: dict[str, _Record] = {}

    def wrote_at(self, owner: str, owner_uid: str, resource: str, resource_version: str) -> None:
        record = self._writes.get(owner)
        if record is None or record.uid != owner_uid:
            record = self._writes[owner] = _Record(owner_uid)
        known = record.versions.get(resource)
        if known is not None:
            try:
                if compare_resource_versions(known, resource_version) >= 0:
                    return
            except ValueError:
                pass
        record.versions[resource] = resource_version

    def record(self, owner: Mapping[str, Any], resource: str, written: Mapping[str, Any]) -> None:
        """``written`` (what the API server answered a write with) was written on behalf of ``owner``."""
        self.wrote_at(key_of(owner), str(meta(owner).get("uid") or ""), resource,
                      str(meta(written).get("resourceVersion") or ""))

    def clear(self, owner: str, owner_uid: str = "") -> None:
        record = self._writes.get(owner)
        if record is not None and (not owner_uid or record.uid == owner_uid):
            del self._writes[owner]

    def ensure_ready(self, owner: str) -> None:
        record = self._writes.get(owner)
        if record is None:
            return
        for resource, wrote in record.versions.items():
            read_version = self._read.get(resource)
            read = read_version() if read_version is not None else ""
            if not read:
                continue
            try:
                behind = compare_resource_versions(wrote, read) > 0
            except ValueError:
                continue  # not comparable: never block syncing on it
            if behind:
                raise StaleCache(read, wrote, resource)
        self.clear(owner, record.uid)

    def __len__(self) -> int:
        return len(self._writes)
