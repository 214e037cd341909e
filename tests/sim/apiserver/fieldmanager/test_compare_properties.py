"""``typed.compare``'s shortcuts (equal subtrees passed over, keyed lists matched in place, the sets of added
values shared between writes) against a plain walk of both objects that takes none of them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.sim.apiserver.fieldmanager import typed
from controller_manager.sim.apiserver.fieldmanager.fieldpath import Path, Set, field, path_string

POD = typed.kind_atom("v1", "Pod")
MISSING = typed.MISSING


def _plain(lhs: Any, rhs: Any, atom: typed.Atom, path: Path, out: dict[str, set[Path]]) -> None:
    """SMD's Compare, every node of both values visited. Values equal by :func:`typed.equal` are the same
    (as kube-sim has always taken them: a map holding true is equal to one holding 1 there)."""
    if lhs is not MISSING and rhs is not MISSING and typed.equal(lhs, rhs):
        return
    a = atom.deduce(rhs if rhs is not MISSING else lhs)
    maps = isinstance(lhs, dict) or isinstance(rhs, dict)
    lists = isinstance(lhs, list) or isinstance(rhs, list)
    if a.map is not None and not a.map.atomic and maps:
        lm = lhs if isinstance(lhs, dict) else {}
        rm = rhs if isinstance(rhs, dict) else {}
        for key in [*rm, *(k for k in lm if k not in rm)]:
            _plain(lm.get(key, MISSING), rm.get(key, MISSING), a.map.child(key), (*path, field(key)), out)
    elif a.list is not None and a.list.associative and lists:
        lt = a.list
        li = {typed.item_element(lt, item): item for item in (lhs if isinstance(lhs, list) else [])}
        ri = {typed.item_element(lt, item): item for item in (rhs if isinstance(rhs, list) else [])}
        for pe in [*li, *(p for p in ri if p not in li)]:
            _plain(li.get(pe, MISSING), ri.get(pe, MISSING), lt.elem(), (*path, pe), out)
    elif lhs is not MISSING and rhs is not MISSING:
        out["modified"].add(path)
        return
    if not path:
        return
    if lhs is MISSING:
        out["added"].add(path)
    elif rhs is MISSING:
        out["removed"].add(path)


def _sets(lhs: Any, rhs: Any) -> dict[str, Set]:
    out: dict[str, set[Path]] = {"removed": set(), "modified": set(), "added": set()}
    _plain(lhs, rhs, POD, (), out)
    return {k: Set.of(*paths) for k, paths in out.items()}


# Values that differ for SMD but not for Python's == (True and 1) and nulls among the leaves.
scalars = st.one_of(st.booleans(), st.integers(0, 1), st.sampled_from(["a", "b", ""]), st.none())
conditions = st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["Ready", "Initialized", "PodScheduled", "example.com/x"]),
                           "status": st.sampled_from(["True", "False"])},
                          optional={"reason": scalars, "lastProbeTime": scalars}),
    max_size=4, unique_by=lambda c: c["type"])
statuses = st.fixed_dictionaries({}, optional={
    "phase": st.sampled_from(["Pending", "Running"]), "podIP": st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    "conditions": conditions,
    "containerStatuses": st.lists(st.fixed_dictionaries({"name": st.just("app"), "ready": st.booleans(),
                                                         "restartCount": st.integers(0, 1)}), max_size=1)})
ports = st.lists(st.fixed_dictionaries({"containerPort": st.sampled_from([80, 8080])},
                                       optional={"protocol": st.sampled_from(["TCP", "UDP"])}),
                 max_size=2, unique_by=lambda p: (p["containerPort"], p.get("protocol", "TCP")))
containers = st.lists(st.fixed_dictionaries({"name": st.sampled_from(["app", "side"]),
                                             "image": st.sampled_from(["i:1", "i:2"])},
                                            optional={"ports": ports, "env": st.just([])}),
                      min_size=1, max_size=2, unique_by=lambda c: c["name"])
pods = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod"),
     "metadata": st.fixed_dictionaries({"name": st.just("p")}, optional={
         "labels": st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"]), max_size=2),
         "annotations": st.dictionaries(st.sampled_from(["note"]), scalars, max_size=1)}),
     "spec": st.fixed_dictionaries({"containers": containers}, optional={"nodeName": scalars})},
    optional={"status": statuses})


def _mix(data: st.DataObject, a: Any, b: Any) -> Any:
    """A value made of parts of ``a`` and ``b`` (most updates leave most of an object as it was)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = {}
        for key in [*a, *(k for k in b if k not in a)]:
            pick = data.draw(st.sampled_from(["a", "b", "mix"]))
            if pick == "mix":
                out[key] = _mix(data, a.get(key, b.get(key)), b.get(key, a.get(key)))
            elif pick != "b" and key in a:
                out[key] = a[key]
            elif key in b:
                out[key] = b[key]
        return out
    if isinstance(a, list) and isinstance(b, list) and [_key(x) for x in a] == [_key(y) for y in b]:
        return [_mix(data, x, y) for x, y in zip(a, b, strict=True)]  # (the same items, their keys kept)
    return data.draw(st.sampled_from([a, b, _twin(a)]))


def _key(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    return tuple(item.get(k) for k in ("name", "type", "containerPort", "protocol"))


def _twin(value: Any) -> Any:
    """The value Python's == takes for ``value`` and SMD does not (1 for true, false for 0)."""
    if type(value) is bool:
        return int(value)
    if type(value) is int and value in (0, 1):
        return bool(value)
    return value


@settings(max_examples=300, deadline=None)
@given(pods, pods, st.data())
def test_compare_matches_a_walk_of_every_node(a: dict[str, Any], b: dict[str, Any], data: st.DataObject) -> None:
    new = _mix(data, a, b)
    for lhs, rhs in ((a, new), (new, a), (a, b)):
        cmp = typed.compare(lhs, rhs, POD)
        expected = _sets(lhs, rhs)
        assert {"removed": cmp.removed, "modified": cmp.modified, "added": cmp.added} == expected
        # (shared nodes keep their FieldsV1: it must be the one their own paths give)
        assert cmp.added.to_fields_v1() == expected["added"].to_fields_v1()


def test_added_values_of_one_shape_share_their_sets() -> None:
    def status(when: str, reason: str) -> dict[str, Any]:
        return {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": when},
                               {"type": "PodScheduled", "status": "True", "reason": reason}]}

    def conditions(s: dict[str, Any]) -> Set:
        added = typed.compare({"status": {}}, {"status": s}, POD).added
        return added.children[field("status")].children[field("conditions")]

    first = conditions(status("2026-01-01T00:00:00Z", "a"))
    # Other values, the same fields: the same node (and FieldsV1); another field: a node of its own.
    assert conditions(status("2026-01-02T00:00:00Z", "b")) is first
    other = status("2026-01-01T00:00:00Z", "a")
    other["conditions"][0]["message"] = "m"
    assert conditions(other) is not first
    assert conditions(other) != first


def test_flat_keyed_lists_are_told_apart_by_their_keys_types_and_fields() -> None:
    # A list keyed by one field, its items maps of scalars: its set is looked up by its shape; true, 1 and
    # 1.0 are distinct keys, and a field more or less is another shape.
    lt = typed.ListType(elem=lambda: typed.UNTYPED, associative=True, keys=("k",))
    keyed = typed.Atom(list=lt)
    lists: list[list[Any]] = [
        [{"k": 1, "a": "x"}], [{"k": True, "a": "x"}], [{"k": 1.0, "a": "x"}], [{"k": 1}],
        [{"k": 1, "a": None, "b": False}], [{"k": 1, "a": "x"}, {"k": 1, "b": "y"}],
        [{"k": "a", "x": [1]}], [{"k": "a"}, "b"], [{"a": "x"}],
    ]
    for _ in range(2):  # (the second time round, from what the first left behind)
        for value in lists:
            assert typed.added_set(value, keyed) == typed._added_items(lt, value)
    assert [path_string(p) for p in typed.added_set(lists[1], keyed).paths()] == ["[k=true]", "[k=true].a",
                                                                                   "[k=true].k"]
