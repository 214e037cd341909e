"""The resource quota controller in-process against kube-sim, seen through the API: a quota's status follows what
its namespace holds, and kube-sim's quota admission enforces those numbers with the real 403."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import CONFIGMAPS, PODS, RESOURCEQUOTAS, SECRETS, SERVICES, Resource
from controller_manager.client.errors import ApiError, Forbidden
from controller_manager.controllers.resourcequota import ResourceQuotaController
from controller_manager.runtime.controller import ControllerContext
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"


def _pod(name: str, cpu: str = "100m", memory: str = "64Mi", **spec: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}], **spec}}


def _quota(name: str, hard: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard, **spec}}


async def _status(h: Harness, name: str) -> dict[str, Any]:
    quota = await h.client.get(RESOURCEQUOTAS, name, NS)
    return dict(quota.get("status") or {})


async def _used_becomes(h: Harness, name: str, want: dict[str, str], timeout: float = 15.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        status = await _status(h, name)
        return status if status.get("used") == want else None
    return await wait_for(check, timeout=timeout, what=f"{name} used == {want}")


async def test_used_follows_pods_and_a_create_over_quota_is_refused() -> None:
    async with controller_harness(ResourceQuotaController, nodes=1,
                                  options={"resource_quota_sync_period": 300.0}) as h:
        await h.client.create(RESOURCEQUOTAS, _quota("compute", {"pods": "2", "requests.cpu": "1",
                                                                  "requests.memory": "1Gi"}), NS)
        status = await _used_becomes(h, "compute", {"pods": "0", "requests.cpu": "0", "requests.memory": "0"})
        assert status["hard"] == {"pods": "2", "requests.cpu": "1", "requests.memory": "1Gi"}

        await h.client.create(PODS, _pod("a", cpu="400m", memory="256Mi"), NS)
        await _used_becomes(h, "compute", {"pods": "1", "requests.cpu": "400m", "requests.memory": "256Mi"})
        await h.client.create(PODS, _pod("b", cpu="500m", memory="256Mi"), NS)
        await _used_becomes(h, "compute", {"pods": "2", "requests.cpu": "900m", "requests.memory": "512Mi"})

        with pytest.raises(Forbidden) as refused:
            await h.client.create(PODS, _pod("c", cpu="200m"), NS)
        assert refused.value.message == (
            'pods "c" is forbidden: exceeded quota: compute, requested: pods=1,requests.cpu=200m, '
            "used: pods=2,requests.cpu=900m, limited: pods=2,requests.cpu=1")

        # Deleting a pod releases its usage (the monitor replenishes the quota once the pod is gone).
        await h.client.delete(PODS, "a", NS, grace_period_seconds=0)
        await _used_becomes(h, "compute", {"pods": "1", "requests.cpu": "500m", "requests.memory": "256Mi"})
        await h.client.create(PODS, _pod("c", cpu="200m"), NS)
        await _used_becomes(h, "compute", {"pods": "2", "requests.cpu": "700m", "requests.memory": "320Mi"})


async def test_terminated_pods_stop_counting_and_spec_changes_show_in_status() -> None:
    async with controller_harness(ResourceQuotaController, nodes=1) as h:
        await h.client.create(RESOURCEQUOTAS, _quota("q", {"pods": "5", "count/pods": "5"}), NS)
        await _used_becomes(h, "q", {"pods": "0", "count/pods": "0"})
        done = _pod("done", restartPolicy="Never")
        done["metadata"]["annotations"] = {"sim.controller-manager.io/run-seconds": "0.2"}
        await h.client.create(PODS, done, NS)
        # Once the pod has Succeeded it no longer counts in "pods", but it still exists: "count/pods" keeps it.
        await _used_becomes(h, "q", {"pods": "0", "count/pods": "1"})

        quota = await h.client.get(RESOURCEQUOTAS, "q", NS)
        quota["spec"]["hard"]["pods"] = "3"
        await h.client.update(RESOURCEQUOTAS, quota)

        async def hard_updated() -> dict[str, Any] | None:
            status = await _status(h, "q")
            return status if (status.get("hard") or {}).get("pods") == "3" else None
        await wait_for(hard_updated, what="status.hard follows spec.hard")


async def test_object_counts_services_and_scopes() -> None:
    async with controller_harness(ResourceQuotaController, nodes=1) as h:
        await h.client.create(CONFIGMAPS, {"metadata": {"name": "before"}, "data": {}}, NS)
        await h.client.create(RESOURCEQUOTAS, _quota("objects", {
            "configmaps": "10", "count/configmaps": "10", "services": "5", "services.nodeports": "4",
            "services.loadbalancers": "1"}), NS)
        await h.client.create(RESOURCEQUOTAS, _quota("best-effort", {"pods": "3"}, scopes=["BestEffort"]), NS)
        await _used_becomes(h, "best-effort", {"pods": "0"})
        # Any other configmaps the namespace holds (kube-root-ca.crt when its publisher runs) count as well.
        existing = len(await h.list_objects(CONFIGMAPS))
        await _used_becomes(h, "objects", {"configmaps": str(existing), "count/configmaps": str(existing),
                                           "services": "0", "services.nodeports": "0",
                                           "services.loadbalancers": "0"})
        await h.client.create(SERVICES, {"metadata": {"name": "np"}, "spec": {
            "type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}, NS)
        await _used_becomes(h, "objects", {"configmaps": str(existing), "count/configmaps": str(existing),
                                           "services": "1", "services.nodeports": "2",
                                           "services.loadbalancers": "0"})
        # Changing the type releases the node ports (an update the monitor replenishes on).
        svc = await h.client.get(SERVICES, "np", NS)
        svc["spec"]["type"] = "ClusterIP"
        for port in svc["spec"]["ports"]:
            port.pop("nodePort", None)
        await h.client.update(SERVICES, svc)
        await _used_becomes(h, "objects", {"configmaps": str(existing), "count/configmaps": str(existing),
                                           "services": "1", "services.nodeports": "0",
                                           "services.loadbalancers": "0"})

        best_effort = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "be"},
                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        await h.client.create(PODS, best_effort, NS)
        await h.client.create(PODS, _pod("burstable"), NS)
        await _used_becomes(h, "best-effort", {"pods": "1"})
        await h.client.delete(PODS, "be", NS, grace_period_seconds=0)
        await _used_becomes(h, "best-effort", {"pods": "0"})


class _Discovery:
    """What discovery answers, switched by the test: resources, an error, or a resource that never lists."""

    def __init__(self) -> None:
        self.resources = [PODS, SECRETS]
        self.error: Exception | None = None
        self.calls = 0

    async def __call__(self) -> tuple[list[Resource], dict[str, ApiError]]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return list(self.resources), {}


DISCOVERY = _Discovery()


class _QuotaControllerWithFakeDiscovery(ResourceQuotaController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, discover=DISCOVERY, discovery_period=0.3)


async def test_discovery_errors_and_unsyncable_resources_never_block_the_workers() -> None:
    """TestDiscoverySync: a discovery error, then a resource whose cache never fills, hold syncs back at most a
    discovery period each; quotas keep being synced."""
    widgets = Resource("example.com", "v1", "widgets", "Widget", True, verbs=("create", "delete", "list", "watch"))
    async with controller_harness(_QuotaControllerWithFakeDiscovery, nodes=1) as h:
        await h.client.create(RESOURCEQUOTAS, _quota("first", {"pods": "3", "count/secrets": "3"}), NS)
        await _used_becomes(h, "first", {"pods": "0", "count/secrets": "0"})

        DISCOVERY.error = ApiError(503, "ServiceUnavailable", "discovery is down")
        calls = DISCOVERY.calls
        await wait_for(lambda: _at_least(DISCOVERY, calls + 2), what="discovery retried")
        await h.client.create(RESOURCEQUOTAS, _quota("second", {"pods": "3"}), NS)
        await _used_becomes(h, "second", {"pods": "0"})

        DISCOVERY.error = None
        DISCOVERY.resources = [PODS, SECRETS, widgets]  # served by no one: its list never succeeds
        calls = DISCOVERY.calls
        await wait_for(lambda: _at_least(DISCOVERY, calls + 2), what="discovery with the unsyncable resource")
        await h.client.create(RESOURCEQUOTAS, _quota("third", {"pods": "3"}), NS)
        await _used_becomes(h, "third", {"pods": "0"})

        DISCOVERY.resources = [PODS, SECRETS]
        await h.client.create(SECRETS, {"metadata": {"name": "s"}, "type": "Opaque"}, NS)
        await _used_becomes(h, "first", {"pods": "0", "count/secrets": "1"})  # charged by admission
        await h.client.delete(SECRETS, "s", NS)
        # The secrets monitor still replenishes after the changes: the deleted secret no longer counts.
        await _used_becomes(h, "first", {"pods": "0", "count/secrets": "0"})


async def _at_least(discovery: _Discovery, calls: int) -> bool:
    return discovery.calls >= calls


class _QuotaControllerDiscoveringQuickly(ResourceQuotaController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, discovery_period=0.5)


WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


async def test_count_quota_of_a_custom_resource_discovered_later() -> None:
    """``count/widgets.example.com``: a kind served after the controller started is discovered, monitored
    (metadata only) and counted by the next full recalculation (``--resource-quota-sync-period``, short here: a
    quota already synced is not looked at again before it); admission refuses the widget over the limit and a
    delete frees its place at once."""
    widgets = Resource("example.com", "v1", "widgets", "Widget", True)
    async with controller_harness(_QuotaControllerDiscoveringQuickly, nodes=1,
                                  options={"resource_quota_sync_period": 2.0}) as h:
        await h.client.create(RESOURCEQUOTAS, _quota("widgets", {"count/widgets.example.com": "2"}), NS)
        # No evaluator for the kind yet: the controller writes hard and leaves used unknown.
        status = await wait_for(lambda: _status_with_hard(h, "widgets"), what="status.hard")
        assert status.get("used", {}) == {}
        await h.client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=WIDGETS_CRD)
        await wait_for(lambda: _served(h, widgets), what="widgets served")
        # Until the controller has counted the new kind, admission answers "status unknown" (as upstream).
        await _used_becomes(h, "widgets", {"count/widgets.example.com": "0"}, timeout=20.0)
        await h.client.create(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                        "metadata": {"name": "one"}}, NS)
        await _used_becomes(h, "widgets", {"count/widgets.example.com": "1"})
        await h.client.create(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                        "metadata": {"name": "two"}}, NS)
        await _used_becomes(h, "widgets", {"count/widgets.example.com": "2"})
        with pytest.raises(Forbidden) as refused:
            await h.client.create(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                            "metadata": {"name": "three"}}, NS)
        assert refused.value.message == (
            'widgets.example.com "three" is forbidden: exceeded quota: widgets, requested: '
            "count/widgets.example.com=1, used: count/widgets.example.com=2, limited: count/widgets.example.com=2")
        await h.client.delete(widgets, "one", NS)
        await _used_becomes(h, "widgets", {"count/widgets.example.com": "1"})


async def _status_with_hard(h: Harness, name: str) -> dict[str, Any] | None:
    status = await _status(h, name)
    return status if status.get("hard") else None


async def _served(h: Harness, res: Resource) -> bool:
    try:
        await h.client.list(res, NS)
    except ApiError:
        return False
    return True
