"""The HPA controller's metrics client (``pkg/controller/podautoscaler/metrics``): per-pod resource usage from the
resource metrics API, per-pod and per-object values from the custom metrics API, and values from the external
metrics API, with upstream's error wording.

Guarantees:
- :meth:`RestMetricsClient.get_resource_metric` lists ``metrics.k8s.io/v1beta1`` PodMetrics of the namespace with
  the selector. A pod counts when every container reports the resource (summed, in milli-units), or, for a
  container metric, when that container reports it; the others are simply absent (the replica calculator treats
  them as missing). No items at all is the error ``no metrics returned from resource metrics API``; a failed list
  is ``unable to fetch metrics from resource metrics API: <error>``. The timestamp is the first item's.
- Custom metrics are read from ``custom.metrics.k8s.io`` (preferred version among v1beta2/v1beta1, found by
  discovery, cached for :data:`DISCOVERY_TTL` seconds). A cluster that does not register the group answers
  ``unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered``.
- External metrics are listed from ``external.metrics.k8s.io/v1beta1``; a failure is ``unable to fetch metrics
  from external metrics API: <error>`` (on a cluster without that API: the API server's 404, as client-go words a
  non-Status 404, ``the server could not find the requested resource (get <metric>.external.metrics.k8s.io)``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from controller_manager.api.cron import parse_duration
from controller_manager.api.meta import parse_time
from controller_manager.api.quantity import QuantityError, milli_value
from controller_manager.api.selectors import Selector
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.clock import Clock

if TYPE_CHECKING:
    from controller_manager.client import ApiClient

__all__ = [
    "CUSTOM_METRICS_GROUP",
    "DISCOVERY_TTL",
    "EXTERNAL_METRICS_GROUP",
    "RESOURCE_METRICS_GROUP",
    "MetricsClient",
    "MetricsError",
    "PodMetric",
    "PodMetricsInfo",
    "RestMetricsClient",
    "pod_metrics_from_list",
]

RESOURCE_METRICS_GROUP = "metrics.k8s.io"
CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
EXTERNAL_METRICS_GROUP = "external.metrics.k8s.io"
_CUSTOM_VERSIONS = ("v1beta2", "v1beta1")
DISCOVERY_TTL = 30.0
# metrics-server's window when a custom metric gives none (metricServerDefaultMetricWindow)
DEFAULT_METRIC_WINDOW = 60.0


class MetricsError(Exception):
    """A metric could not be read; ``str()`` is upstream's message."""


@dataclass(frozen=True, slots=True)
class PodMetric:
    """One pod's sample: when it was taken, over which window (seconds), and its value in milli-units."""

    timestamp: float
    window: float
    value: int


PodMetricsInfo = dict[str, PodMetric]


class MetricsClient(Protocol):
    async def get_resource_metric(self, resource: str, namespace: str, selector: Selector,
                                  container: str) -> tuple[PodMetricsInfo, float]: ...

    async def get_raw_metric(self, metric_name: str, namespace: str, selector: Selector,
                             metric_selector: Selector) -> tuple[PodMetricsInfo, float]: ...

    async def get_object_metric(self, metric_name: str, namespace: str, object_ref: Mapping[str, Any],
                                metric_selector: Selector) -> tuple[int, float]: ...

    async def get_external_metric(self, metric_name: str, namespace: str,
                                  selector: Selector) -> tuple[list[int], float]: ...


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _duration(text: Any) -> float:
    """A metav1.Duration as metrics-server writes it (``10s``, ``1m0s``, ``500ms``)."""
    try:
        return parse_duration(str(text)).total_seconds() if text else 0.0
    except ValueError:
        return 0.0


def _milli(quantity: Any) -> int | None:
    try:
        return milli_value(quantity)
    except (QuantityError, ValueError, TypeError):
        return None


def pod_metrics_from_list(items: Sequence[Mapping[str, Any]], resource: str, container: str) -> PodMetricsInfo:
    """getPodMetrics / getContainerMetrics over PodMetrics items."""
    out: PodMetricsInfo = {}
    for item in items:
        name = str(_dict(item.get("metadata")).get("name") or "")
        timestamp = parse_time(item.get("timestamp")) or 0.0
        window = _duration(item.get("window"))
        containers = [_dict(c) for c in item.get("containers") or ()]
        if container:
            for c in containers:
                if c.get("name") == container:
                    value = _milli(_dict(c.get("usage")).get(resource)) if resource in _dict(c.get("usage")) else None
                    if value is not None:
                        out[name] = PodMetric(timestamp, window, value)
                    break
            continue
        total = 0
        missing = not containers
        for c in containers:
            usage = _dict(c.get("usage"))
            value = _milli(usage.get(resource)) if resource in usage else None
            if value is None:
                missing = True
                break
            total += value
        if not missing:
            out[name] = PodMetric(timestamp, window, total)
    return out


Mapper = Callable[[str, str], Awaitable[str]]  # (apiVersion, kind) -> plural resource name


class RestMetricsClient:
    """restMetricsClient: the three metrics APIs through the API server (aggregated APIs)."""

    def __init__(self, client: ApiClient, clock: Clock, resource_for_kind: Mapper | None = None) -> None:
        self._client = client
        self._clock = clock
        self._resource_for_kind = resource_for_kind
        self._custom_version: str | None = None
        self._custom_error: str | None = None
        self._custom_checked = float("-inf")

    # --- resource metrics -------------------------------------------------------------------------------

    async def get_resource_metric(self, resource: str, namespace: str, selector: Selector,
                                  container: str) -> tuple[PodMetricsInfo, float]:
        path = f"/apis/{RESOURCE_METRICS_GROUP}/v1beta1/namespaces/{namespace}/pods"
        try:
            listed = await self._client.request("GET", path, params={"labelSelector": str(selector)})
        except ApiError as err:
            raise MetricsError(f"unable to fetch metrics from resource metrics API: {err}") from err
        items = [_dict(i) for i in _dict(listed).get("items") or ()]
        if not items:
            raise MetricsError("no metrics returned from resource metrics API")
        return pod_metrics_from_list(items, resource, container), parse_time(items[0].get("timestamp")) or 0.0

    # --- custom metrics ---------------------------------------------------------------------------------

    async def _custom_api(self) -> str:
        """The custom metrics API's preferred version, or MetricsError if none is registered."""
        now = self._clock.monotonic()
        if now - self._custom_checked >= DISCOVERY_TTL:
            self._custom_checked = now
            try:
                groups = _dict(await self._client.request("GET", "/apis"))
            except ApiError as err:
                self._custom_version, self._custom_error = None, str(err)
            else:
                group = next((_dict(g) for g in groups.get("groups") or ()
                              if _dict(g).get("name") == CUSTOM_METRICS_GROUP), None)
                if group is None:
                    self._custom_version = None
                    self._custom_error = f"no custom metrics API ({CUSTOM_METRICS_GROUP}) registered"
                else:
                    served = [str(_dict(v).get("version")) for v in group.get("versions") or ()]
                    preferred = str(_dict(group.get("preferredVersion")).get("version") or "")
                    choice = preferred if preferred in _CUSTOM_VERSIONS else next(
                        (v for v in _CUSTOM_VERSIONS if v in served), None)
                    self._custom_version = choice
                    self._custom_error = None if choice else "no known available metric versions found"
        if self._custom_version is None:
            raise MetricsError(f"unable to fetch metrics from custom metrics API: {self._custom_error}")
        return self._custom_version

    async def _custom_get(self, path: str, params: Mapping[str, str]) -> Mapping[str, Any]:
        version = await self._custom_api()
        try:
            return _dict(await self._client.request("GET", f"/apis/{CUSTOM_METRICS_GROUP}/{version}{path}",
                                                    params=params))
        except ApiError as err:
            raise MetricsError(f"unable to fetch metrics from custom metrics API: {err}") from err

    async def get_raw_metric(self, metric_name: str, namespace: str, selector: Selector,
                             metric_selector: Selector) -> tuple[PodMetricsInfo, float]:
        listed = await self._custom_get(f"/namespaces/{namespace}/pods/*/{quote(metric_name)}", {
            "labelSelector": str(selector), "metricLabelSelector": str(metric_selector)})
        items = [_dict(i) for i in listed.get("items") or ()]
        if not items:
            raise MetricsError("no metrics returned from custom metrics API")
        out: PodMetricsInfo = {}
        for item in items:
            window = item.get("windowSeconds")
            out[str(_dict(item.get("describedObject")).get("name") or "")] = PodMetric(
                parse_time(item.get("timestamp")) or 0.0,
                float(window) if isinstance(window, int) else DEFAULT_METRIC_WINDOW,
                _milli(item.get("value")) or 0)
        return out, parse_time(items[0].get("timestamp")) or 0.0

    async def get_object_metric(self, metric_name: str, namespace: str, object_ref: Mapping[str, Any],
                                metric_selector: Selector) -> tuple[int, float]:
        api_version = str(object_ref.get("apiVersion") or "")
        kind = str(object_ref.get("kind") or "")
        if kind == "Namespace" and "/" not in api_version:
            path = f"/namespaces/{namespace}/metrics/{quote(metric_name)}"
        else:
            version = await self._custom_api()  # the API's absence is reported before any mapping
            del version
            if self._resource_for_kind is None:
                raise MetricsError(f"unable to fetch metrics from custom metrics API: no mapping for {kind}")
            try:
                plural = await self._resource_for_kind(api_version, kind)
            except Exception as err:
                raise MetricsError(f"unable to fetch metrics from custom metrics API: {err}") from err
            path = f"/namespaces/{namespace}/{plural}/{quote(str(object_ref.get('name') or ''))}/{quote(metric_name)}"
        listed = await self._custom_get(path, {"metricLabelSelector": str(metric_selector)})
        items = [_dict(i) for i in listed.get("items") or ()]
        if not items:
            raise MetricsError(f"unable to fetch metrics from custom metrics API: no metric value found for "
                               f"{kind} {object_ref.get('name')}")
        return _milli(items[0].get("value")) or 0, parse_time(items[0].get("timestamp")) or 0.0

    # --- external metrics -------------------------------------------------------------------------------

    async def get_external_metric(self, metric_name: str, namespace: str,
                                  selector: Selector) -> tuple[list[int], float]:
        path = f"/apis/{EXTERNAL_METRICS_GROUP}/v1beta1/namespaces/{namespace}/{quote(metric_name)}"
        try:
            listed = _dict(await self._client.request("GET", path, params={"labelSelector": str(selector)}))
        except NotFound as err:
            message = str(err)
            if not (isinstance(err.body, Mapping) and err.body.get("kind") == "Status"):
                # not a Status (no such API group): client-go's message names what it asked for
                message = (f"the server could not find the requested resource "
                           f"(get {metric_name}.{EXTERNAL_METRICS_GROUP})")
            raise MetricsError(f"unable to fetch metrics from external metrics API: {message}") from err
        except ApiError as err:
            raise MetricsError(f"unable to fetch metrics from external metrics API: {err}") from err
        items = [_dict(i) for i in listed.get("items") or ()]
        if not items:
            raise MetricsError("no metrics returned from external metrics API")
        return [_milli(i.get("value")) or 0 for i in items], parse_time(items[0].get("timestamp")) or 0.0
