"""The bootstrap RBAC policy kube-sim serves, compared object by object with upstream's expected output
(plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata, committed under data/bootstrappolicy/ with the upstream
commit each was taken from): every ClusterRole and ClusterRoleBinding upstream creates, no more, with the same
rules in the same order, labels, annotations, aggregation rules, role references and subjects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sim.apiserver.conftest import Client

RBAC = "/apis/rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
DATA = Path(__file__).parent / "data" / "bootstrappolicy"
LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
CONTROLLER_PREFIX = "system:controller:"


def _items(name: str) -> list[dict[str, Any]]:
    # libyaml's safe loader: these tables are read at collection, by every xdist worker (pure Python: ~1 s).
    items: list[dict[str, Any]] = yaml.load((DATA / name).read_text(), Loader=yaml.CSafeLoader)["items"]
    return items


def _expected_roles() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in _items("cluster-roles.yaml"):
        out[item["name"]] = item
    for item in _items("controller-roles.yaml"):
        out[CONTROLLER_PREFIX + item["name"]] = {**item, "name": CONTROLLER_PREFIX + item["name"]}
    return out


def _expected_bindings() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {item["name"]: item for item in _items("cluster-role-bindings.yaml")}
    for item in _items("controller-roles.yaml"):
        name = CONTROLLER_PREFIX + item["name"]
        out[name] = {"name": name, "role": name,
                     "subjects": [{"kind": "ServiceAccount", "name": item["name"], "namespace": "kube-system"}]}
    return out


EXPECTED_ROLES = _expected_roles()
EXPECTED_BINDINGS = _expected_bindings()


async def _served(client: Client, plural: str) -> dict[str, dict[str, Any]]:
    code, body = await client.get(f"{RBAC}/{plural}", params={"labelSelector": "kubernetes.io/bootstrapping"})
    assert code == 200, body
    return {item["metadata"]["name"]: item for item in body["items"]}


async def test_exactly_upstreams_bootstrap_cluster_roles_are_served(client: Client) -> None:
    served = await _served(client, "clusterroles")
    assert sorted(served) == sorted(EXPECTED_ROLES)


async def test_exactly_upstreams_bootstrap_cluster_role_bindings_are_served(client: Client) -> None:
    served = await _served(client, "clusterrolebindings")
    assert sorted(served) == sorted(EXPECTED_BINDINGS)


@pytest.mark.parametrize("name", sorted(EXPECTED_ROLES))
async def test_cluster_role_matches_upstream(client: Client, name: str) -> None:
    want = EXPECTED_ROLES[name]
    code, role = await client.get(f"{RBAC}/clusterroles/{name}")
    assert code == 200, role
    assert role["metadata"]["labels"] == {**want.get("labels", {}), **LABELS}
    assert role["metadata"]["annotations"] == ANNOTATIONS
    assert role.get("aggregationRule") == want.get("aggregationRule")
    if "aggregationRule" not in want:
        # Aggregated roles' rules are the aggregation controller's to fill (see test_auth); the rest are upstream's.
        assert role["rules"] == want["rules"]


@pytest.mark.parametrize("name", sorted(EXPECTED_BINDINGS))
async def test_cluster_role_binding_matches_upstream(client: Client, name: str) -> None:
    want = EXPECTED_BINDINGS[name]
    code, binding = await client.get(f"{RBAC}/clusterrolebindings/{name}")
    assert code == 200, binding
    assert binding["metadata"]["labels"] == LABELS
    assert binding["metadata"]["annotations"] == ANNOTATIONS
    assert binding["roleRef"] == {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": want["role"]}
    assert binding.get("subjects") == want.get("subjects")


async def test_the_aggregated_roles_hold_the_union_of_their_sources(client: Client) -> None:
    # With nothing else labelled, view is system:aggregate-to-view's rules, edit adds system:aggregate-to-edit's,
    # admin adds system:aggregate-to-admin's (the aggregation controller orders sources by name).
    view = EXPECTED_ROLES["system:aggregate-to-view"]["rules"]
    edit = EXPECTED_ROLES["system:aggregate-to-edit"]["rules"]
    admin = EXPECTED_ROLES["system:aggregate-to-admin"]["rules"]
    for name, sources in (("view", [view]), ("edit", [edit, view]), ("admin", [admin, edit, view])):
        _, role = await client.get(f"{RBAC}/clusterroles/{name}")
        want: list[dict[str, Any]] = []
        for rules in sources:
            want.extend(r for r in rules if r not in want)
        assert sorted(map(_key, role["rules"])) == sorted(map(_key, want)), name


def _key(rule: dict[str, Any]) -> str:
    return json.dumps(rule, sort_keys=True)


EXPECTED_NAMESPACE_ROLES = {(i["namespace"], i["name"]): i for i in _items("namespace-roles.yaml")}
EXPECTED_NAMESPACE_BINDINGS = {(i["namespace"], i["name"]): i for i in _items("namespace-role-bindings.yaml")}


async def _served_in(client: Client, plural: str) -> dict[tuple[str, str], dict[str, Any]]:
    code, body = await client.get(f"{RBAC}/{plural}", params={"labelSelector": "kubernetes.io/bootstrapping"})
    assert code == 200, body
    return {(item["metadata"]["namespace"], item["metadata"]["name"]): item for item in body["items"]}


async def test_the_bootstrap_roles_in_kube_system_and_kube_public_are_upstreams(client: Client) -> None:
    served = await _served_in(client, "roles")
    assert sorted(served) == sorted(EXPECTED_NAMESPACE_ROLES)
    for key, want in EXPECTED_NAMESPACE_ROLES.items():
        role = served[key]
        assert role["metadata"]["labels"] == LABELS, key
        assert role["metadata"]["annotations"] == ANNOTATIONS, key
        assert role["rules"] == want["rules"], key


async def test_the_bootstrap_role_bindings_in_kube_system_and_kube_public_are_upstreams(client: Client) -> None:
    served = await _served_in(client, "rolebindings")
    assert sorted(served) == sorted(EXPECTED_NAMESPACE_BINDINGS)
    for key, want in EXPECTED_NAMESPACE_BINDINGS.items():
        binding = served[key]
        assert binding["metadata"]["labels"] == LABELS, key
        assert binding["metadata"]["annotations"] == ANNOTATIONS, key
        assert binding["roleRef"] == {"apiGroup": RBAC_GROUP, "kind": "Role", "name": want["role"]}, key
        assert binding["subjects"] == want["subjects"], key
