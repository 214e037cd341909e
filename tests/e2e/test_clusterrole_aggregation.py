"""ClusterRole aggregation done by the daemon, as in a real cluster: kube-sim runs with
``--no-aggregate-cluster-roles`` (so, as kube-apiserver, it leaves ``admin``/``edit``/``view`` empty) and only
the clusterrole-aggregation-controller fills them. Judged by the real kubectl: the bootstrap roles get their
rules, written by server-side apply as the controller's field manager; a ClusterRole labelled
``aggregate-to-view`` makes ``view`` (and through it ``edit`` and ``admin``) grow, and deleting it makes them
shrink again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import Https, Kubectl, KubeSim, Processes, start_kube_sim, start_manager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

WIDGETS = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}
WIDGETS_VIEW = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
    "rules": [WIDGETS],
}


@pytest.fixture
async def sim(processes: Processes) -> KubeSim:
    return await start_kube_sim(processes, extra=["--no-aggregate-cluster-roles"])


async def cluster_role(kubectl: Kubectl, name: str, *flags: str) -> dict[str, Any]:
    role: dict[str, Any] = json.loads(await kubectl.ok("get", "clusterrole", name, "-o", "json", *flags))
    return role


async def rules_of(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    return list((await cluster_role(kubectl, name)).get("rules") or [])


async def test_the_controller_aggregates_cluster_roles(processes: Processes, sim: KubeSim, https: Https,
                                                       kubectl: Kubectl) -> None:
    # Without the controller nothing fills the aggregated roles.
    for name in ("view", "edit", "admin"):
        assert await rules_of(kubectl, name) == [], name
    source = await rules_of(kubectl, "system:aggregate-to-view")
    assert source

    await start_manager(processes, sim, "--controllers=clusterrole-aggregation", https=https)

    async def view_filled() -> bool:
        return await rules_of(kubectl, "view") == source

    await wait_until(view_filled, timeout=30, what="view to get the rules of system:aggregate-to-view")

    async def chain_filled() -> bool:
        view, edit, admin = [await rules_of(kubectl, n) for n in ("view", "edit", "admin")]
        return bool(view) and all(r in edit for r in view) and all(r in admin for r in edit)

    await wait_until(chain_filled, timeout=30, what="edit and admin to include view's rules")
    view = await cluster_role(kubectl, "view", "--show-managed-fields")
    managers = {(m["manager"], m["operation"]) for m in view["metadata"]["managedFields"]}
    assert ("clusterrole-aggregation-controller", "Apply") in managers

    # A role labelled aggregate-to-view: view grows, and through it edit and admin.
    manifest = processes.directory / "widgets-view.json"
    manifest.write_text(json.dumps(WIDGETS_VIEW))
    await kubectl.ok("apply", "-f", str(manifest))

    async def grown() -> bool:
        return all([WIDGETS in await rules_of(kubectl, n) for n in ("view", "edit", "admin")])

    await wait_until(grown, timeout=30, what="view, edit and admin to include the widgets rule")
    assert await rules_of(kubectl, "view") == [*source, WIDGETS]  # roles by name: system:... < widgets-view

    # Deleted again: they shrink back.
    await kubectl.ok("delete", "clusterrole", "widgets-view")

    async def shrunk() -> bool:
        return all([WIDGETS not in await rules_of(kubectl, n) for n in ("view", "edit", "admin")])

    await wait_until(shrunk, timeout=30, what="the widgets rule to leave view, edit and admin")
    assert await rules_of(kubectl, "view") == source
