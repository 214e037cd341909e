"""A Lease renewal stored without the generic update, when what the update would store is known beforehand.

A kubelet renews its node's Lease every 10 s: at 5,000 nodes, 500 updates a second that each change one field.
The generic update (defaulting, the strategy, validation, a managedFields diff, Go-form normalisation) costs
most of a millisecond; the stored result of a renewal is knowable without it.

Guarantees:
- :func:`renew_in_place` stores the Lease exactly as ``ApiServer.update`` with the Lease read back and
  ``spec.renewTime`` replaced (``field_manager`` recording the write) would: same bytes, a new resourceVersion,
  one MODIFIED watch event; it does so only where that is certain, and otherwise returns False having written
  nothing, for the caller to send the generic update. Certain means: the holder and duration are already the
  ones written (so only ``renewTime`` changes), the Lease is not being deleted, and its managedFields are one
  Update entry of ``field_manager`` in the Lease's version owning ``spec.renewTime`` (the update then only
  moves that entry's time to now).
- A renewal to the renewTime already stored writes nothing (as the update would: it changes nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import format_time
from controller_manager.api.resources import LEASES

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.objects import Stored
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["renew_in_place"]


def _sole_entry(meta: dict[str, Any], manager: str) -> dict[str, Any] | None:
    """The managedFields entry a renewal by ``manager`` only re-times, or None."""
    entries = meta.get("managedFields")
    if not isinstance(entries, list) or len(entries) != 1:
        return None
    entry = entries[0]
    if not isinstance(entry, dict) or entry.get("manager") != manager or entry.get("operation") != "Update" \
            or entry.get("apiVersion") != LEASES.api_version or entry.get("subresource") \
            or entry.get("fieldsType") != "FieldsV1":
        return None
    spec_fields = (entry.get("fieldsV1") or {}).get("f:spec")
    if not isinstance(spec_fields, dict) or "f:renewTime" not in spec_fields:
        return None
    return entry


def renew_in_place(api: ApiServer, stored: Stored, *, holder: str, duration: int, renew_time: str,
                   manager: str, now: float) -> bool:
    """Renew ``stored`` (the Lease's latest stored version) to ``renew_time`` at ``now``; False: not certain here,
    nothing written (send the generic update)."""
    obj = stored.obj
    meta = obj["metadata"]
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("holderIdentity") != holder \
            or spec.get("leaseDurationSeconds") != duration or meta.get("deletionTimestamp"):
        return False
    entry = _sole_entry(meta, manager)
    if entry is None:
        return False
    if spec.get("renewTime") == renew_time:
        return True  # the update would change nothing
    renewed = {**obj, "metadata": {**meta, "managedFields": [{**entry, "time": format_time(now)}]},
               "spec": {**spec, "renewTime": renew_time}}
    api.store_update_prepared(LEASES, stored, renewed)
    return True
