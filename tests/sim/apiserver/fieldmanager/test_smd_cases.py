"""structured-merge-diff's merge tests, run through kube-sim's port of its Updater (typed walks and sets)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import yaml

from controller_manager.sim.apiserver.fieldmanager import typed, updater
from controller_manager.sim.apiserver.fieldmanager.fieldpath import Set, parse_element
from controller_manager.sim.apiserver.fieldmanager.managed import Managed, ManagerId

from .smd_cases import CASES, SCHEMAS


def _atoms(doc: str) -> dict[str, typed.Atom]:
    """An SMD schema (YAML) as atoms by type name."""
    types = {t["name"]: t for t in yaml.safe_load(doc)["types"]}
    built: dict[str, typed.Atom] = {}

    def ref(tr: dict[str, Any]) -> typed.Atom:
        if "namedType" in tr:
            name = tr["namedType"]
            if name in ("__untyped_deduced_", "__untyped_atomic_"):
                return typed.UNTYPED
            if name not in built:
                built[name] = typed.Atom()
                fill(built[name], types[name])
            return built[name]
        atom = typed.Atom()
        fill(atom, tr)
        return atom

    def fill(atom: typed.Atom, spec: dict[str, Any]) -> None:
        if "scalar" in spec:
            atom.scalar = True
            if spec["scalar"] == "untyped":
                atom.list = typed.UNTYPED.list
                atom.map = typed.UNTYPED.map
        if "list" in spec:
            lst = spec["list"]
            elem = lst["elementType"]
            keys = tuple(lst.get("keys") or ())
            defaults: dict[str, Any] = {}
            for f in ((elem.get("map") or {}).get("fields") or []):
                if "default" in f and f["name"] in keys:
                    defaults[f["name"]] = f["default"]
            atom.list = typed.ListType(elem=functools.cache(lambda: ref(elem)),
                                       associative=lst.get("elementRelationship") == "associative", keys=keys,
                                       key_defaults=defaults)
        if "map" in spec:
            m = spec["map"]
            fields = {f["name"]: f["type"] for f in m.get("fields") or []}
            cache: dict[str, typed.Atom] = {}

            def field(name: str, fields: dict[str, Any] = fields, cache: dict[str, typed.Atom] = cache
                      ) -> typed.Atom | None:
                if name not in fields:
                    return None
                if name not in cache:
                    cache[name] = ref(fields[name])
                return cache[name]

            elem_type = m.get("elementType")
            atom.map = typed.MapType(elem=functools.cache(lambda: ref(elem_type)) if elem_type else None,
                                     fields=field if fields else None,
                                     atomic=m.get("elementRelationship") == "atomic")

    return {name: ref({"namedType": name}) for name in types}


@functools.cache
def _root(schema_name: str) -> typed.Atom:
    if schema_name == "deduced":
        return typed.UNTYPED
    doc, root = SCHEMAS[schema_name]
    atoms = _atoms(doc)
    return atoms[root] if root else atoms[yaml.safe_load(doc)["types"][0]["name"]]


def _path(elements: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(parse_element(e) for e in elements)


def _mid(name: str) -> ManagerId:
    # SMD's tests key managers by name alone, whatever the operation.
    return ManagerId(name, "", "")


@pytest.mark.parametrize("case", CASES, ids=[f"{c['schema']}-{c['name']}" for c in CASES])
def test_smd_case(case: dict[str, Any]) -> None:
    atom = _root(case["schema"])
    ignored = {v: Set.of(*(_path(p) for p in paths)) for v, paths in case["ignore"].items()}
    live: Any = None
    managed = Managed.empty()
    for op, manager, version, obj, conflicts in case["ops"]:
        if op == "update":
            managed = updater.raw_update(managed, live if live is not None else typed.MISSING, obj, atom,
                                         mid=_mid(manager), api_version=version, ignored=ignored.get(version))
            live = obj
            continue
        try:
            merged, managed = updater.raw_apply(managed, live if live is not None else typed.MISSING, obj, atom,
                                                mid=_mid(manager), api_version=version, force=op == "force_apply",
                                                ignored=ignored.get(version))
        except updater.Conflicts as e:
            got = sorted((m.manager, p) for m, p in e.conflicts)
            assert got == sorted((m, _path(p)) for m, p in conflicts), case["name"]
            continue
        assert not conflicts, f"expected conflicts {conflicts}"
        live = merged
    if case["object"] is not None:
        assert live == case["object"]
    if case["managed"] is None:  # the upstream case does not check ownership
        return
    got_managed = {m.manager: (sorted(vs.set.paths()), vs.api_version) for m, vs in managed.fields.items()}
    want = {m: (sorted(_path(p) for p in paths), v) for m, (paths, v) in case["managed"].items()}
    assert got_managed == want
