"""The legacy service account token cleaner (kube-controller-manager's
``legacy-serviceaccount-token-cleaner-controller``,
``pkg/controller/serviceaccount/legacy_serviceaccount_token_cleaner.go``).

Auto-generated legacy tokens (a ``kubernetes.io/service-account-token`` Secret that its ServiceAccount lists in
``secrets``) that nobody used for ``--legacy-service-account-token-clean-up-period`` (default one year) are first
labelled invalid, then deleted one more period later.

Guarantees:
- Once at start and then every 24 hours (``DefaultCleanerSyncInterval``, measured from the end of a pass as
  ``wait.Until``), a pass reads the ``kube-system/kube-apiserver-legacy-service-account-token-tracking``
  ConfigMap (a GET, every pass) whose ``since`` date says when the API server began stamping
  ``kubernetes.io/legacy-token-last-used``. Missing ConfigMap or date, or a bad date: the pass ends (logged).
  Until one period has gone by since the day after that date, nothing else happens.
- Then every cached token Secret created more than a period ago, not being deleted, whose last-used date (if
  it has one; a malformed one spares it) is older than a period ago, whose ServiceAccount (annotated name, and
  uid when given) exists in the cache and references it, and that no pod of its namespace refers to
  (``VisitPodSecretNames``: volumes, env, envFrom, image pull secrets) is:
  - labelled ``kubernetes.io/legacy-token-invalid-since: <today>`` (a merge patch carrying its uid) when that
    label is missing or malformed;
  - else deleted, with a resourceVersion precondition, once that date is older than a period ago.
  Failures are logged and the Secret is looked at again on the next pass; Conflict and NotFound on delete are
  silent. Dates are UTC ``YYYY-MM-DD`` and compared as strings, as upstream.
- Pods: this daemon's pod cache keeps no volumes or env (see the pod projection in runtime/informers), so the
  pods of a namespace are listed from the API server, once per pass and namespace, and only for a Secret that
  passed every other check (upstream reads them from its pod cache).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.resources import CONFIGMAPS, PODS, SECRETS, SERVICEACCOUNTS
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.controllers.serviceaccounttoken.tokens import (
    SERVICE_ACCOUNT_NAME_KEY,
    SERVICE_ACCOUNT_TOKEN_TYPE,
    SERVICE_ACCOUNT_UID_KEY,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result

__all__ = ["DEFAULT_CLEAN_UP_PERIOD", "DEFAULT_SYNC_INTERVAL", "INVALID_SINCE_LABEL", "LAST_USED_LABEL",
           "TRACKING_CONFIGMAP", "LegacySATokenCleaner", "pod_secret_names"]

Obj = Mapping[str, Any]

LAST_USED_LABEL = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"
TRACKING_CONFIGMAP = "kube-apiserver-legacy-service-account-token-tracking"
TRACKING_SINCE_KEY = "since"
DEFAULT_CLEAN_UP_PERIOD = 365 * 24 * 3600.0
DEFAULT_SYNC_INTERVAL = 24 * 3600.0
KEY = "evaluate"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_date(text: str) -> datetime | None:
    """``time.Parse("2006-01-02", text)``: None when it does not parse."""
    if not _DATE.match(text):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None


def format_date(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d")


def _name(ref: Any) -> str:
    return str(ref.get("name") or "") if isinstance(ref, dict) else ""


def pod_secret_names(pod: Obj) -> set[str]:
    """Every Secret name a pod refers to (``podutil.VisitPodSecretNames``)."""
    spec = pod.get("spec") or {}
    out = {_name(r) for r in spec.get("imagePullSecrets") or ()}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            for src in (container or {}).get("envFrom") or ():
                out.add(_name((src or {}).get("secretRef")))
            for env in (container or {}).get("env") or ():
                out.add(_name(((env or {}).get("valueFrom") or {}).get("secretKeyRef")))
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        out.add(str((volume.get("secret") or {}).get("secretName") or ""))
        out.add(str((volume.get("azureFile") or {}).get("secretName") or ""))
        for kind in ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"):
            out.add(_name((volume.get(kind) or {}).get("secretRef")))
        out.add(_name((volume.get("csi") or {}).get("nodePublishSecretRef")))
        for source in (volume.get("projected") or {}).get("sources") or ():
            out.add(_name((source or {}).get("secret")))
    out.discard("")
    return out


class LegacySATokenCleaner(Controller):
    """One periodic pass over the cached token Secrets; its queue holds the single key ``evaluate``."""

    name: ClassVar[str] = "legacy-serviceaccount-token-cleaner-controller"
    alias: ClassVar[str] = "legacy-service-account-token-cleaner"
    queue_name: ClassVar[str | None] = "legacy_serviceaccount_token_cleaner"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext, *, sync_interval: float = DEFAULT_SYNC_INTERVAL,
                 list_pods: Callable[[str], Any] | None = None) -> None:
        super().__init__(ctx)
        period = ctx.options.get("legacy_service_account_token_clean_up_period", DEFAULT_CLEAN_UP_PERIOD)
        self.clean_up_period = float(period)
        if not self.clean_up_period > 0:
            raise ValueError(f"invalid CleanUpPeriod: {self.clean_up_period}s")
        if not sync_interval > 0:
            raise ValueError(f"invalid SyncInterval: {sync_interval}")
        self.sync_interval = sync_interval
        self.sa_informer = ctx.informers.informer(SERVICEACCOUNTS)
        self.secret_informer = ctx.informers.informer(SECRETS)
        self._list_pods = list_pods or self._list_namespace_pods
        self.queue.add(KEY)

    async def sync(self, key: str) -> Result | None:
        await self.evaluate()
        return Result(requeue_after=self.sync_interval)

    async def _list_namespace_pods(self, namespace: str) -> list[dict[str, Any]]:
        pods, _ = await self.ctx.client.list_all(PODS, namespace)
        return pods

    async def tracked_since(self) -> datetime:
        """The day after the API server started tracking legacy token use (``latestPossibleTrackedSinceTime``)."""
        cm = await self.ctx.client.get(CONFIGMAPS, TRACKING_CONFIGMAP, "kube-system")
        since = (cm.get("data") or {}).get(TRACKING_SINCE_KEY)
        if since is None:
            raise ValueError("configMap does not have since label")
        parsed = parse_date(str(since))
        if parsed is None:
            raise ValueError(f'error parsing trackedSince time: parsing time "{since}" as "2006-01-02"')
        return parsed + timedelta(days=1)

    async def evaluate(self) -> None:
        """One pass (upstream ``evaluateSATokens``)."""
        now = datetime.fromtimestamp(self.ctx.clock.now(), UTC)
        try:
            tracked_since = await self.tracked_since()
        except (ApiError, ValueError) as err:
            self.log.error("getting latest possible tracked_since time", error=str(err))
            return
        period = timedelta(seconds=self.clean_up_period)
        if now < tracked_since + period:
            return  # not tracking for long enough
        preserve_created_on_or_after = now - period
        preserve_used_on_or_after = format_date(now - period)
        mounted: dict[str, set[str]] = {}
        for secret in self._candidates(preserve_created_on_or_after, preserve_used_on_or_after):
            m = meta(secret)
            namespace, name = str(m.get("namespace") or ""), str(m.get("name") or "")
            if namespace not in mounted:
                try:
                    mounted[namespace] = set().union(*(pod_secret_names(p) for p in await self._list_pods(namespace)))
                except ApiError as err:
                    self.log.error("resolving mounted secrets", secret=f"{namespace}/{name}", error=str(err))
                    continue
            if name in mounted[namespace]:
                continue  # still used by pods
            labels = m.get("labels") or {}
            invalid_since = str(labels.get(INVALID_SINCE_LABEL) or "")
            if parse_date(invalid_since) is None:
                invalid_since = format_date(now)
                self.log.info("mark the auto-generated service account token as invalid", invalid_since=invalid_since,
                              secret=f"{namespace}/{name}")
                patch = {"metadata": {"labels": {INVALID_SINCE_LABEL: invalid_since}, "name": name,
                                      "namespace": namespace, "uid": m.get("uid")},
                         "kind": "Secret", "apiVersion": "v1"}
                try:
                    await self.ctx.client.patch(SECRETS, name, patch, namespace, patch_type="merge")
                except ApiError as err:
                    self.log.error("failed to label legacy service account token secret with invalid since date",
                                   secret=f"{namespace}/{name}", error=str(err))
                continue
            if invalid_since >= preserve_used_on_or_after:
                continue
            self.log.info("delete auto-generated service account token", secret=f"{namespace}/{name}",
                          creation_time=m.get("creationTimestamp"), last_used=labels.get(LAST_USED_LABEL, ""),
                          invalid_since=invalid_since)
            try:
                await self.ctx.client.delete(SECRETS, name, namespace,
                                             resource_version=str(m.get("resourceVersion") or "") or None)
            except (Conflict, NotFound):
                pass
            except ApiError as err:
                self.log.error("deleting legacy service account token", secret=f"{namespace}/{name}",
                               error=str(err))

    def _candidates(self, created_before: datetime, used_before: str) -> Iterable[Obj]:
        """Cached auto-generated token Secrets unused for a period (every check but the pods and labels)."""
        for secret in self.secret_informer.store.list():
            if secret.get("type") != SERVICE_ACCOUNT_TOKEN_TYPE:
                continue
            m = meta(secret)
            created = parse_time(m.get("creationTimestamp"))
            if created is None or not created < created_before.timestamp():
                continue
            if m.get("deletionTimestamp"):
                continue
            labels = m.get("labels") or {}
            if LAST_USED_LABEL in labels:
                last_used = str(labels[LAST_USED_LABEL])
                if parse_date(last_used) is None:
                    self.log.error("parsing lastUsed time", secret=f"{m.get('namespace')}/{m.get('name')}",
                                   last_used=last_used)
                    continue
                if last_used >= used_before:
                    continue
            sa = self._service_account(secret)
            if sa is None or not any((r or {}).get("name") == m.get("name") for r in sa.get("secrets") or ()):
                continue  # cannot tell it is an auto-generated token
            yield secret

    def _service_account(self, secret: Obj) -> Obj | None:
        annotations = meta(secret).get("annotations") or {}
        sa_name = str(annotations.get(SERVICE_ACCOUNT_NAME_KEY) or "")
        if not sa_name:
            return None
        sa = self.sa_informer.store.get(f"{meta(secret).get('namespace')}/{sa_name}")
        if sa is None:
            return None
        uid = str(annotations.get(SERVICE_ACCOUNT_UID_KEY) or "")
        return sa if not uid or uid == meta(sa).get("uid") else None
