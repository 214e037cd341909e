"""Property: whatever kube-sim accepts, it returns as upstream's OpenAPI schema of the release describes it.

For every kind it serves, objects of valid Go types are drawn from kube-sim's own schema (most are refused by
validation, which is what a real server does too; the refusal must be a 4xx Status) and, for kinds with a status,
statuses are written over a valid object. Every object kube-sim answers with is checked against upstream's
1.37 schema with required fields (``kubernetes-validate``'s strict documents): a field Go always writes that
kube-sim left out, a value of the wrong type, or a field upstream does not know fails the check.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from controller_manager.api.resources import BUILTIN, Resource
from controller_manager.sim.apiserver import ApiServer, codec, errors, schema
from tests.sim.apiserver import upstream_schema
from tests.sim.apiserver.schema_strategies import objects
from tests.sim.apiserver.test_official_client import NAMES, OBJECTS, body_of

REVIEWS = {"TokenReview", "SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview",
           "SelfSubjectRulesReview", "SelfSubjectReview"}  # answers, not stored objects: read in test_official_client
KINDS = [r for r in BUILTIN if "create" in r.verbs and r.kind not in REVIEWS]
PROPERTY = settings(max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "15")), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_names = itertools.count()


def _refused(e: errors.StatusError) -> None:
    assert e.status["kind"] == "Status"
    assert 400 <= e.code < 500, e.status


def _struct_of(res: Resource) -> schema.Struct:
    st = schema.kind(res.api_version, res.kind)
    assert st is not None
    return st


@pytest.mark.parametrize("res", KINDS, ids=lambda r: f"{r.group or 'core'}.{r.kind}")
def test_what_kube_sim_answers_is_valid_upstream(res: Resource) -> None:
    api = ApiServer()
    namespace = "default" if res.namespaced else None
    accepted = {"create": 0, "status": 0}

    base_name = NAMES.get(res.kind, "base")
    base = api.create(res, codec.typed(res, body_of(res, base_name), "Strict").obj, namespace, typed=True)
    upstream_schema.check(base)

    @PROPERTY
    @given(objects(_struct_of(res).name, depth=3))
    def creates(drawn: dict[str, Any]) -> None:
        body = {**drawn, "apiVersion": res.api_version, "kind": res.kind,
                "metadata": {"name": f"drawn-{next(_names)}", "labels": {"a": "b"}}}
        try:
            out = api.create(res, codec.typed(res, body, "Strict").obj, namespace, typed=True)
        except errors.StatusError as e:
            _refused(e)
            return
        accepted["create"] += 1
        if any(_at(out, path) is None and _at(out, path[:-1]) is not None for path in WRITES_NULL.get(res.kind, ())):
            return
        upstream_schema.check(out)

    creates()

    status_field = _struct_of(res).json_fields.get("status")
    if "status" in res.subresources and status_field is not None and status_field.type.kind == "struct":

        @PROPERTY
        @given(objects(status_field.type.name, depth=3))
        def statuses(drawn: dict[str, Any]) -> None:
            current = api.get(res, namespace, base_name)
            body = codec.typed(res, {**current, "status": drawn}, "Strict").obj
            try:
                out = api.update(res, body, subresource="status", namespace=namespace, name=base_name)
            except errors.StatusError as e:
                _refused(e)
                return
            accepted["status"] += 1
            upstream_schema.check(out)

        statuses()
        assert accepted["status"], "no drawn status was accepted: the property was never checked"
    if res.kind in LAX:
        assert accepted["create"], "no drawn object was accepted: the property was never checked"


# Fields without omitempty that the real server writes as null when a client leaves them out, which the OpenAPI
# schema (an array) does not allow: upstream's answers fail the same check there.
WRITES_NULL: dict[str, tuple[tuple[str, ...], ...]] = {"LimitRange": (("spec", "limits"),),
                                                    "CSINode": (("spec", "drivers"),)}


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj



# Kinds whose validation accepts most well-typed objects: drawn creates must get through for these.
LAX = {"ConfigMap", "Secret", "ServiceAccount", "Lease", "ControllerRevision", "ClusterRole", "Role"}


def test_every_kind_has_a_base_object() -> None:
    assert {r.kind for r in KINDS} <= set(OBJECTS)
