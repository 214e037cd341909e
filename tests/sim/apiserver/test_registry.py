"""The registry: one strategy per served kind, found by (group, kind); custom resources get the custom
resource strategy whatever their kind is called, so a CRD kind named like a built-in one gets none of the
built-in kind's rules."""

from __future__ import annotations

import copy
from typing import Any

from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, schema
from controller_manager.sim.apiserver.registry import GENERIC, registered, strategy_for
from controller_manager.sim.apiserver.registry.apiextensions import CustomResourceStrategy
from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_crd import CRDS, SCHEMA

PODS_CRD = "/apis/stable.example.com/v1/namespaces/default/pods"


def _pods_crd() -> dict[str, Any]:
    """A CRD whose kind is "Pod" in another group, without a status subresource."""
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "pods.stable.example.com"},
            "spec": {"group": "stable.example.com", "scope": "Namespaced", "versions": [version],
                     "names": {"plural": "pods", "singular": "pod", "kind": "Pod", "listKind": "PodList"}}}


def test_every_strategy_is_for_a_kind_of_its_group() -> None:
    served = {(r.group, r.kind) for r in ApiServerOptions().resources}
    versions: dict[str, set[str]] = {}
    for r in ApiServerOptions().resources:
        versions.setdefault(r.group, set()).add(r.version)
    for group, kind in registered():
        known = (group, kind) in served or any(
            schema.kind(f"{group}/{v}" if group else v, kind) is not None for v in versions.get(group, ()))
        assert known, (group, kind)


def test_unlisted_kinds_get_the_generic_strategy(api: ApiServer) -> None:
    configmaps = api.lookup("", "v1", "configmaps")
    assert configmaps is not None
    assert strategy_for(configmaps) is GENERIC
    for res in api.resources:
        assert strategy_for(res) is registered().get((res.group, res.kind), GENERIC)


async def test_custom_resource_named_like_a_builtin_kind_gets_no_builtin_rules(client: Client, api: ApiServer
                                                                                ) -> None:
    code, body = await client.post(CRDS, _pods_crd())
    assert code == 201, body
    res = api.lookup("stable.example.com", "v1", "pods")
    assert res is not None
    assert isinstance(strategy_for(res), CustomResourceStrategy)
    # A core Pod needs containers and starts Pending; this Pod is only its schema's.
    code, body = await client.post(PODS_CRD, {"apiVersion": "stable.example.com/v1", "kind": "Pod",
                                              "metadata": {"name": "p"}, "spec": {"cronSpec": "* * * * */5"}})
    assert code == 201, body
    assert "status" not in body
    assert body["metadata"]["generation"] == 1
    # And it is deleted at once, not gracefully, answered with a Success Status as the generic store does.
    code, body = await client.delete(f"{PODS_CRD}/p")
    assert code == 200, body
    assert body["kind"] == "Status"
    assert body["status"] == "Success"
