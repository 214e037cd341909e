"""Which pod changes matter to a Service's EndpointSlices (``util/controller_utils.go``'s
``podEndpointsChanged`` and ``determineNeededServiceUpdates``). Endpoint identity and port keys are shared with
the mirroring controller, in :mod:`controller_manager.controllerutil.endpointslice`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.pods import is_pod_ready, pod_ips

# --- which pod changes matter (``podEndpointsChanged``) ---------------------------------------------------

def _hostname_and_subdomain(pod: Mapping[str, Any]) -> tuple[Any, Any]:
    spec = pod.get("spec") or {}
    return spec.get("hostname"), spec.get("subdomain")


def pod_endpoints_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[bool, bool]:
    """(the pod's endpoint may have changed, the Services it matches may have changed)."""
    labels_changed = ((meta(new).get("labels") or {}) != (meta(old).get("labels") or {})
                      or _hostname_and_subdomain(new) != _hostname_and_subdomain(old))
    if meta(new).get("deletionTimestamp") != meta(old).get("deletionTimestamp"):
        return True, labels_changed
    if is_pod_ready(old) != is_pod_ready(new):
        return True, labels_changed
    if pod_ips(old) != pod_ips(new):
        return True, labels_changed
    # Name, namespace and uid are immutable, and nodeName is set before the pod has an IP.
    return False, labels_changed


def determine_needed_service_updates(old_services: set[str], services: set[str], pod_changed: bool) -> set[str]:
    """With changed labels: every Service of either set if the pod changed too, else only those it joined or
    left (the symmetric difference)."""
    if pod_changed:
        return services | old_services
    return services ^ old_services
