"""Invariants of ownership under random applies and updates by a few managers (untyped maps of scalars)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.sim.apiserver.fieldmanager import typed, updater
from controller_manager.sim.apiserver.fieldmanager.managed import APPLY, UPDATE, Managed, ManagerId

keys = st.sampled_from(["a", "b", "c", "d"])
values = st.sampled_from(["1", "2"])
# Non-empty: SMD treats an empty map and null as distinct values, which the server's normalization then hides.
configs = st.dictionaries(keys, values, min_size=1, max_size=4).map(lambda d: {"data": d})
ops = st.lists(st.tuples(st.sampled_from(["apply", "force", "update"]), st.sampled_from(["x", "y", "z"]), configs),
               max_size=8)


def _leaves(obj: Any) -> set[tuple[Any, ...]]:
    return {(("f", "data"), ("f", k)) for k in (obj or {}).get("data") or {}}


@settings(max_examples=200, deadline=None)
@given(ops)
def test_owned_fields_exist_and_reapplying_changes_nothing(sequence: list[tuple[str, str, dict[str, Any]]]) -> None:
    live: Any = typed.MISSING
    managed = Managed.empty()
    for op, name, config in sequence:
        if op == "update":
            new = {"data": {**((live or {}).get("data") or {}), **config["data"]}} if live is not typed.MISSING \
                else config
            managed = updater.raw_update(managed, live, new, typed.UNTYPED, mid=ManagerId(name, UPDATE, "v1"),
                                         api_version="v1", ignored=None)
            live = new
            continue
        mid = ManagerId(name, APPLY, "")
        try:
            merged, managed = updater.raw_apply(managed, live, config, typed.UNTYPED, mid=mid, api_version="v1",
                                                force=op == "force", ignored=None)
        except updater.Conflicts as e:
            assert op == "apply"
            # Only fields whose value the config changes conflict.
            for _, path in e.conflicts:
                key = path[-1][1]
                assert config["data"].get(key) != (live.get("data") or {}).get(key)
            continue
        live = merged
        # The applier owns exactly what it applied (the data map itself aside).
        owned = {p for p in managed.fields[mid].set.paths() if len(p) == 2} if mid in managed.fields else set()
        assert owned == _leaves(config)
        again, _ = updater.raw_apply(managed, live, config, typed.UNTYPED, mid=mid, api_version="v1", force=False,
                                     ignored=None)
        assert again == live
    present = _leaves(live if live is not typed.MISSING else {})
    for vs in managed.fields.values():
        assert {p for p in vs.set.paths() if len(p) == 2} <= present
