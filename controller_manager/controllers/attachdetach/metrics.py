"""The attach/detach controller's Prometheus metrics (``pkg/controller/volume/attachdetach/metrics``), on the
default registry with upstream's names and labels:

- ``attachdetach_controller_forced_detaches`` {reason}: detaches done without waiting for the node to unmount,
  ``timeout`` (the max wait for unmount passed on an unhealthy node) or ``out-of-service`` (the node is tainted
  ``node.kubernetes.io/out-of-service``);
- ``attachdetach_controller_total_volumes`` {plugin_name, state}: volumes in the desired
  (``desired_state_of_world``) and actual (``actual_state_of_world``) caches, by plugin
  (``kubernetes.io/csi:<driver>``), collected at scrape time from the running controllers.
"""

from __future__ import annotations

import weakref
from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller_manager.api.csi import CSI_PLUGIN_NAME
from controller_manager.controllers.attachdetach.cache import ActualStateOfWorld, DesiredStateOfWorld

__all__ = ["FORCED_DETACHES", "REASON_OUT_OF_SERVICE", "REASON_TIMEOUT", "watch_states"]

REASON_TIMEOUT = "timeout"
REASON_OUT_OF_SERVICE = "out-of-service"

FORCED_DETACHES = Counter("attachdetach_controller_forced_detaches",
                          "Number of times the A/D Controller performed a forced detach", ["reason"])

_STATES: weakref.WeakKeyDictionary[DesiredStateOfWorld, ActualStateOfWorld] = weakref.WeakKeyDictionary()


def watch_states(dsw: DesiredStateOfWorld, asw: ActualStateOfWorld) -> None:
    """Count these caches in ``attachdetach_controller_total_volumes`` while they live."""
    _STATES[dsw] = asw


def _plugin(driver: str) -> str:
    return f"{CSI_PLUGIN_NAME}:{driver}"


class _TotalVolumes(Collector):
    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("attachdetach_controller_total_volumes", "Number of volumes in A/D Controller",
                                   labels=["plugin_name", "state"])
        desired: Tally[str] = Tally()
        actual: Tally[str] = Tally()
        for dsw, asw in list(_STATES.items()):
            for volume in dsw.volumes_to_attach():
                desired[_plugin(volume.spec.driver)] += 1
            for attached in asw.attached_volumes():
                if attached.spec is not None:
                    actual[_plugin(attached.spec.driver)] += 1
        for plugin, count in sorted(desired.items()):
            family.add_metric([plugin, "desired_state_of_world"], count)
        for plugin, count in sorted(actual.items()):
            family.add_metric([plugin, "actual_state_of_world"], count)
        yield family


REGISTRY.register(_TotalVolumes())
