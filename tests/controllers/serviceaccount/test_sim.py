"""The service account controller in-process against kube-sim: every active namespace gets its ``default``
ServiceAccount, and gets it back when it is deleted; a terminating namespace gets nothing, so the namespace
controller can empty it."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from controller_manager.api.resources import NAMESPACES, SERVICEACCOUNTS
from controller_manager.client import NotFound
from controller_manager.controllers.namespace import NamespaceController
from controller_manager.controllers.serviceaccount import ServiceAccountsController
from tests.controllers.harness import Harness, controller_harness, wait_for

Obj = dict[str, Any]


async def get_sa(h: Harness, namespace: str, name: str = "default") -> Obj | None:
    try:
        return await h.client.get(SERVICEACCOUNTS, name, namespace)
    except NotFound:
        return None


async def new_namespace(h: Harness, name: str) -> None:
    await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def recreated(h: Harness, namespace: str) -> Obj:
    """Delete ``namespace``'s default ServiceAccount and wait for the controller to make a new one."""
    old = await wait_for(lambda: get_sa(h, namespace), what=f"{namespace}/default")
    await h.client.delete(SERVICEACCOUNTS, "default", namespace)

    async def new() -> Obj | None:
        sa = await get_sa(h, namespace)
        return sa if sa is not None and sa["metadata"]["uid"] != old["metadata"]["uid"] else None

    return await wait_for(new, what=f"a new {namespace}/default")


async def test_every_namespace_gets_a_default_service_account() -> None:
    async with controller_harness(ServiceAccountsController, nodes=0) as h:
        # The namespaces that existed before the controller started...
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            sa = await wait_for(functools.partial(get_sa, h, ns), what=f"{ns}/default")
            assert sa["metadata"]["namespace"] == ns
        # ...and a new one.
        await new_namespace(h, "team-a")
        sa = await wait_for(lambda: get_sa(h, "team-a"), what="team-a/default")
        assert sa["metadata"]["name"] == "default"
        # Only "default" is ensured.
        items, _ = await h.client.list_all(SERVICEACCOUNTS, "team-a")
        assert [i["metadata"]["name"] for i in items] == ["default"]


async def test_deleted_default_service_account_comes_back_and_others_do_not() -> None:
    async with controller_harness(ServiceAccountsController, nodes=0) as h:
        await new_namespace(h, "team-b")
        await h.client.create(SERVICEACCOUNTS, {"metadata": {"name": "builder", "namespace": "team-b"}})
        await recreated(h, "team-b")
        await h.client.delete(SERVICEACCOUNTS, "builder", "team-b")
        # The controller syncs one namespace at a time, in order: once a later deletion is repaired, the
        # earlier one has been looked at too.
        await recreated(h, "default")
        assert await get_sa(h, "team-b", "builder") is None


async def test_terminating_namespace_gets_nothing() -> None:
    async with controller_harness(ServiceAccountsController, nodes=0) as h:
        await new_namespace(h, "doomed")
        await wait_for(lambda: get_sa(h, "doomed"), what="doomed/default")
        # No namespace controller runs: the namespace stays Terminating (its "kubernetes" finalizer stays).
        await h.client.delete(NAMESPACES, "doomed")
        await wait_for(lambda: _terminating(h, "doomed"), what="doomed terminating")
        controller = h.controller(ServiceAccountsController)
        await wait_for(lambda: _cached_phase(controller, "doomed", "Terminating"), what="cache sees Terminating")
        await h.client.delete(SERVICEACCOUNTS, "default", "doomed")
        await recreated(h, "default")  # the barrier: "doomed" has been synced since
        assert await get_sa(h, "doomed") is None
        assert controller.queue.num_requeues("doomed") == 0


class QuickNamespaceController(NamespaceController):
    """Upstream's namespace controller with a short HA grace period, to keep the test quick."""

    deletion_grace_period: ClassVar[float] = 0.2


async def test_namespace_deletion_completes_beside_the_namespace_controller() -> None:
    async with controller_harness(ServiceAccountsController, QuickNamespaceController, nodes=0) as h:
        await new_namespace(h, "short-lived")
        await wait_for(lambda: get_sa(h, "short-lived"), what="short-lived/default")
        await h.client.delete(NAMESPACES, "short-lived")

        async def gone() -> bool:
            try:
                await h.client.get(NAMESPACES, "short-lived")
            except NotFound:
                return True
            return False

        await wait_for(gone, what="namespace deleted")
        # The namespace controller's deletion of the ServiceAccount was synced without a create or a failure.
        assert h.controller(ServiceAccountsController).queue.num_requeues("short-lived") == 0


async def _terminating(h: Harness, name: str) -> bool:
    ns = await h.client.get(NAMESPACES, name)
    return (ns.get("status") or {}).get("phase") == "Terminating"


async def _cached_phase(c: ServiceAccountsController, name: str, phase: str) -> bool:
    ns = c.ns_informer.store.get(name)
    return ns is not None and (ns.get("status") or {}).get("phase") == phase
