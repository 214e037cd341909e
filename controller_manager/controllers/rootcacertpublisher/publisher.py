"""The root CA certificate publisher: the ``kube-root-ca.crt`` ConfigMap in every namespace
(kube-controller-manager's ``root-ca-certificate-publisher-controller``,
``pkg/controller/certificates/rootcacertpublisher/publisher.go``).

Every pod's projected service-account volume mounts ``ca.crt`` from this ConfigMap: without it, no pod in the
namespace starts.

Guarantees:
- Keys are namespace names. A namespace added, or updated while ``Active``, is synced; so is the namespace of a
  ``kube-root-ca.crt`` ConfigMap that is updated or deleted. Other ConfigMaps are ignored.
- A sync reads the ConfigMap from the cache. Missing: it is created with ``data: {ca.crt: <bundle>}`` and the
  ``kubernetes.io/description`` annotation; a namespace that is gone or terminating makes that a success (no
  retry). Present with exactly that data and a non-empty description: left alone (a different description is
  kept, as upstream). Otherwise: updated from the cached copy (a new dict; its ``resourceVersion`` guards the
  write, so a conflict is retried with backoff), with the data replaced and the description set; every other
  field, label and annotation is kept.
- The bundle is fixed when the controller is built (see :mod:`.bundle`). One worker, as upstream.
  Queue ``root_ca_cert_publisher``.
- Prometheus, as upstream: ``root_ca_cert_publisher_sync_total{code}`` and
  ``root_ca_cert_publisher_sync_duration_seconds{code}``; ``code`` is 200 for a successful sync, the API
  error's HTTP status otherwise (500 when it has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from prometheus_client import Counter, Histogram

from controller_manager.api.meta import meta
from controller_manager.api.resources import CONFIGMAPS, NAMESPACES
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, NotFound, has_status_cause
from controller_manager.controllers.rootcacertpublisher.bundle import load_root_ca
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

__all__ = ["DESCRIPTION", "DESCRIPTION_ANNOTATION", "NAMESPACE_TERMINATING_CAUSE", "ROOT_CA_CERT_CONFIGMAP_NAME",
           "SYNC_LATENCY", "SYNC_TOTAL", "RootCACertPublisher", "is_namespace_terminating_error", "new_config_map",
           "sync_code"]

Obj = Mapping[str, Any]

ROOT_CA_CERT_CONFIGMAP_NAME = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")
CA_KEY = "ca.crt"


# Upstream's metrics.go (subsystem root_ca_cert_publisher); both help texts are upstream's.
SYNC_TOTAL = Counter("root_ca_cert_publisher_sync_total",
                     "Number of namespace syncs happened in root ca cert publisher.", ["code"])
SYNC_LATENCY = Histogram("root_ca_cert_publisher_sync_duration_seconds",
                         "Number of namespace syncs happened in root ca cert publisher.", ["code"],
                         buckets=[0.001 * 2**i for i in range(15)])


def is_namespace_terminating_error(err: BaseException) -> bool:
    """``errors.HasStatusCause(err, NamespaceTerminatingCause)``."""
    return has_status_cause(err, NAMESPACE_TERMINATING_CAUSE)


def sync_code(err: BaseException | None) -> str:
    """The ``code`` label of a sync's metrics (upstream ``recordMetrics``)."""
    if err is None:
        return "200"
    if isinstance(err, ApiError) and err.status:
        return str(err.status)
    return "500"


class RootCACertPublisher(Controller):
    """Namespaces -> their ``kube-root-ca.crt`` ConfigMap. Its queue holds namespace names."""

    name: ClassVar[str] = "root-ca-certificate-publisher-controller"
    alias: ClassVar[str] = "root-ca-cert-publisher"
    queue_name: ClassVar[str | None] = "root_ca_cert_publisher"
    workers_option: ClassVar[str | None] = None  # upstream runs exactly one worker, with no flag
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        # The PEM bundle published as ca.crt; a bad --root-ca-file fails the controller's start, as upstream.
        self.root_ca: str = load_root_ca(ctx.options, getattr(ctx.client, "config", None))
        self.cm_informer = ctx.informers.informer(CONFIGMAPS)
        self.cm_informer.add_handler(self._on_config_map)
        self.ns_informer = ctx.informers.informer(NAMESPACES)
        self.ns_informer.add_handler(self._on_namespace)

    # --- event handlers: they only enqueue namespace names --------------------------------------------

    def _on_config_map(self, event: Event) -> None:
        if isinstance(event, Added):
            # As upstream: a ConfigMap's appearance needs no sync; its namespace's sync reads whatever is cached.
            return
        cm = event.obj if isinstance(event, Deleted) else event.new
        m = meta(cm)
        if m.get("name") != ROOT_CA_CERT_CONFIGMAP_NAME:
            return
        namespace = m.get("namespace")
        if namespace:
            self.queue.add(str(namespace))

    def _on_namespace(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        if isinstance(event, Updated) and (event.new.get("status") or {}).get("phase") != "Active":
            return  # a namespace being deleted is not worth a sync (an added one always is, as upstream)
        ns = event.obj if isinstance(event, Added) else event.new
        name = meta(ns).get("name")
        if name:
            self.queue.add(str(name))

    # --- sync ---------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        started = self.ctx.clock.monotonic()
        try:
            await self._sync_namespace(key)
        except Exception as err:
            self._record(key, started, err)
            raise
        self._record(key, started, None)
        return None

    def _record(self, key: str, started: float, err: BaseException | None) -> None:
        code = sync_code(err)
        SYNC_LATENCY.labels(code).observe(max(0.0, self.ctx.clock.monotonic() - started))
        SYNC_TOTAL.labels(code).inc()
        self.log.debug("finished syncing namespace", key=key, code=code)

    async def _sync_namespace(self, namespace: str) -> None:
        cm = self.cm_informer.store.get(f"{namespace}/{ROOT_CA_CERT_CONFIGMAP_NAME}")
        if cm is None:
            try:
                await self.ctx.client.create(CONFIGMAPS, new_config_map(namespace, self.root_ca), namespace)
            except NotFound:
                return  # the namespace is gone
            except ApiError as err:
                if is_namespace_terminating_error(err):
                    return  # the namespace is being emptied: nothing new goes in
                raise
            self.log.info("created root CA configmap", key=namespace)
            return

        data = {CA_KEY: self.root_ca}
        annotations = meta(cm).get("annotations") or {}
        if cm.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        # A new object from the cached one (never mutate the cache): data replaced, description set.
        updated = {**cm, "data": data,
                   "metadata": {**meta(cm), "annotations": {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}}}
        await self.ctx.client.update(CONFIGMAPS, updated)
        self.log.info("updated root CA configmap", key=namespace)


def new_config_map(namespace: str, root_ca: str) -> dict[str, Any]:
    """The ``kube-root-ca.crt`` ConfigMap for ``namespace``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ROOT_CA_CERT_CONFIGMAP_NAME, "namespace": namespace,
                     "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
        "data": {CA_KEY: root_ca},
    }
