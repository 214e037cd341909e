"""The legacy service account token cleaner against a recording fake client: upstream's
TestLegacyServiceAccountTokenCleanUp table (legacy_serviceaccount_token_cleaner_test.go), one case per row.

Upstream's cases say "now" is the test's wall clock and build each clean-up period as now minus a date; here now
is a fixed instant and the period is built the same way, so every date the table names keeps its meaning."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.api.meta import format_time, key_of
from controller_manager.clock import FakeClock
from controller_manager.controllers.serviceaccounttoken import LegacySATokenCleaner
from controller_manager.controllers.serviceaccounttoken.legacycleaner import (
    INVALID_SINCE_LABEL,
    LAST_USED_LABEL,
    TRACKING_CONFIGMAP,
    pod_secret_names,
)
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.serviceaccounttoken.fake import Action, FakeClient
from tests.controllers.serviceaccounttoken.test_tokens import EMPTY, TOKEN, opaque_secret, service_account

Obj = dict[str, Any]
NOW = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)
TODAY = "2023-06-01"


def day(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)


def period_since(start: str) -> float:
    """configuredLegacyTokenCleanUpPeriod: from midnight of ``start`` to now."""
    return (NOW - day(start)).total_seconds()


def tracking(since: str = "") -> Obj:
    cm: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": TRACKING_CONFIGMAP, "namespace": "kube-system"}}
    if since:
        cm["data"] = {"since": since}
    return cm


def token(last_used: str, invalid_since: str, created: str, sa_name: str = "default", sa_uid: str = "12345",
          deleted: bool = False) -> Obj:
    labels = {}
    if last_used:
        labels[LAST_USED_LABEL] = last_used
    if invalid_since:
        labels[INVALID_SINCE_LABEL] = invalid_since
    meta: Obj = {"name": "token-secret-1", "namespace": "default", "uid": "23456", "resourceVersion": "1",
                 "labels": labels, "creationTimestamp": format_time(day(created).timestamp()),
                 "annotations": {"kubernetes.io/service-account.name": sa_name,
                                 "kubernetes.io/service-account.uid": sa_uid}}
    if deleted:
        meta["deletionTimestamp"] = format_time(NOW.timestamp())
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token", "metadata": meta,
            "data": {"token": "QUJD", "ca.crt": "Q0EgRGF0YQ==", "namespace": "ZGVmYXVsdA=="}}


def pod(with_secret_mount: bool) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "i"}]}
    if with_secret_mount:
        spec["volumes"] = [{"name": "foo", "secret": {"secretName": "token-secret-1"}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-1", "namespace": "default"}, "spec": spec}


GET_CM = Action("get", "configmaps", "kube-system", TRACKING_CONFIGMAP)
PODS = Action("list", "pods", "default")


def mark_invalid(date: str = TODAY) -> Action:
    return Action("patch", "secrets", "default", "token-secret-1", ("merge", {
        "kind": "Secret", "apiVersion": "v1",
        "metadata": {"name": "token-secret-1", "namespace": "default", "uid": "23456",
                     "labels": {INVALID_SINCE_LABEL: date}}}))


DELETE = Action("delete", "secrets", "default", "token-secret-1", {"resourceVersion": "1"})


@dataclass
class Case:
    secret: Obj
    period: float
    sa: Obj | None = None
    pod: Obj | None = None
    config_map: Obj | None = None
    expected: list[Action] = field(default_factory=list)  # beyond the ConfigMap GET every pass makes


SA_REF, SA_NOREF = service_account(TOKEN), service_account(EMPTY)
CASES: dict[str, Case] = {
    "configmap does not exist": Case(token("2022-12-27", "", "2022-12-27"), period_since("2022-12-28"), SA_REF,
                                     pod(False)),
    "configmap exists, but the configmap does not have tracked-since label": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-28"), SA_REF, pod(False), tracking()),
    "configmap exists, the time period since 'tracked-since' is smaller than the CleanUpPeriod": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-29")),
    "configmap exists, the 'tracked-since' cannot be parsed": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-27-1")),
    "secret is not SecretTypeServiceAccountToken type": Case(
        opaque_secret(), period_since("2022-12-29"), SA_REF, pod(False), tracking("2022-12-28")),
    "secret is not referenced by serviceaccount": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-29"), SA_NOREF, pod(False),
        tracking("2022-12-27")),
    "auto-generated secret has a late creation time": Case(
        token("2022-12-27", "", "2022-12-30"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-27")),
    "auto-generated secret has a deletion time": Case(
        token("2022-12-27", "", "2022-12-27", deleted=True), period_since("2022-12-30"), SA_REF, pod(False),
        tracking("2022-12-27")),
    "auto-generated secret has a late last-used time": Case(
        token("2022-12-30", "", "2022-12-27"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-27")),
    "auto-generated secret has a last-used label, but it can not be parsed": Case(
        token("2022-12-27-1", "", "2022-12-27"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-27")),
    "secret-referenced service account does not exist": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-29"), None, pod(False),
        tracking("2022-12-27")),
    "secret-referenced service account uid does not match": Case(
        token("2022-12-27", "", "2022-12-27", sa_uid="123456"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-27")),
    "secret-referenced service account name is empty": Case(
        token("2022-12-27", "", "2022-12-27", sa_name=""), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-27")),
    "auto-generated secret does not have 'last-used' label, has not been marked as invalid": Case(
        token("", "", "2022-12-27"), period_since("2022-12-30"), SA_REF, pod(False), tracking("2022-12-28"),
        [PODS, mark_invalid()]),
    "auto-generated secret does not have 'last-used' label, has been marked as invalid, invalid_since label can "
    "not be parsed": Case(
        token("", "2022-12-29-1", "2022-12-27"), period_since("2022-12-30"), SA_REF, pod(False),
        tracking("2022-12-28"), [PODS, mark_invalid()]),
    "auto-generated secret does not have 'last-used' label, has been marked as invalid, time period since invalid "
    "is less than CleanUpPeriod": Case(
        token("", "2023-01-01", "2022-12-27"), period_since("2022-12-29"), SA_REF, pod(False),
        tracking("2022-12-28"), [PODS]),
    "auto-generated secret does not have 'last-used' label, has been marked as invalid, time period since invalid "
    "is larger than CleanUpPeriod": Case(
        token("", "2022-12-29", "2022-12-27"), period_since("2023-01-01"), SA_REF, pod(False),
        tracking("2022-12-28"), [PODS, DELETE]),
    "auto-generated secret is mounted by the pod": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-29"), SA_REF, pod(True),
        tracking("2022-12-28"), [PODS]),
    "auto-generated secret has 'last-used' label, the time period since last-used is larger than CleanUpPeriod, "
    "secret has not been marked as invalid": Case(
        token("2022-12-27", "", "2022-12-27"), period_since("2022-12-30"), SA_REF, pod(False),
        tracking("2022-12-28"), [PODS, mark_invalid()]),
    "auto-generated secret has 'last-used' label, the time period since last-used is larger than CleanUpPeriod, "
    "secret has been marked as invalid, time peroid since invalid is less than CleanUpPeriod": Case(
        token("2022-12-27", "2023-05-01", "2022-12-27"), period_since("2022-12-30"), SA_REF, pod(False),
        tracking("2022-12-28"), [PODS]),
    "auto-generated secret has 'last-used' label, the time period since last-used is larger than CleanUpPeriod, "
    "secret has been marked as invalid, time peroid since invalid is larger than CleanUpPeriod": Case(
        token("2022-12-27", "2023-01-05", "2022-12-27"), period_since("2023-05-01"), SA_REF, pod(False),
        tracking("2022-12-28"), [PODS, DELETE]),
}


def new_cleaner(client: FakeClient, period: float) -> LegacySATokenCleaner:
    clock = FakeClock(NOW.timestamp())
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock),  # type: ignore[arg-type]
                            options={"legacy_service_account_token_clean_up_period": period})
    return LegacySATokenCleaner(ctx, sync_interval=30.0)


@pytest.mark.parametrize("name", sorted(CASES))
async def test_legacy_service_account_token_clean_up(name: str) -> None:
    tc = CASES[name]
    client = FakeClient()
    if tc.config_map is not None:
        client.add("configmaps", tc.config_map)
    client.add("secrets", tc.secret)
    if tc.pod is not None:
        client.add("pods", tc.pod)
    cleaner = new_cleaner(client, tc.period)
    if tc.sa is not None:
        cleaner.sa_informer.store._put(key_of(tc.sa), tc.sa)
    cleaner.secret_informer.store._put(key_of(tc.secret), tc.secret)

    await cleaner.evaluate()

    # Upstream reads pods from its cache; this daemon lists them (see legacycleaner), which is the one extra read.
    assert client.actions == [GET_CM, *tc.expected]
    cleaner.queue.shut_down()


async def test_the_pass_repeats_every_sync_interval() -> None:
    client = FakeClient()
    cleaner = new_cleaner(client, period_since("2022-12-29"))
    assert len(cleaner.queue) == 1  # the first pass runs at start
    key = await cleaner.queue.get()
    assert key is not None
    result = await cleaner.sync(key)
    assert result is not None
    assert result.requeue_after == 30.0
    cleaner.queue.shut_down()


def test_a_period_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid CleanUpPeriod"):
        new_cleaner(FakeClient(), 0.0)


def test_pod_secret_names_visit_every_reference() -> None:
    p = {"spec": {
        "imagePullSecrets": [{"name": "pull"}],
        "initContainers": [{"envFrom": [{"secretRef": {"name": "init-env"}}]}],
        "containers": [{"env": [{"name": "x", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}]}],
        "ephemeralContainers": [{"envFrom": [{"secretRef": {"name": "debug"}}]}],
        "volumes": [{"secret": {"secretName": "vol"}}, {"azureFile": {"secretName": "azure"}},
                    {"cephfs": {"secretRef": {"name": "ceph"}}}, {"csi": {"nodePublishSecretRef": {"name": "csi"}}},
                    {"projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "cm"}}]}}]}}
    assert pod_secret_names(p) == {"pull", "init-env", "env", "debug", "vol", "azure", "ceph", "csi", "proj"}
