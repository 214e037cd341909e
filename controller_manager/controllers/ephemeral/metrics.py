"""The ephemeral volume controller's Prometheus metrics (``pkg/controller/volume/ephemeral/metrics``), on the
default registry with upstream's names and help texts (subsystem ``ephemeral_volume_controller``):

- ``create_total``: every PersistentVolumeClaim create request it made, successful or not;
- ``create_failures_total``: those that failed.
"""

from __future__ import annotations

from prometheus_client import Counter

CREATE_ATTEMPTS = Counter("ephemeral_volume_controller_create_total",
                          "Number of PersistenVolumeClaims creation requests")
CREATE_FAILURES = Counter("ephemeral_volume_controller_create_failures_total",
                          "Number of PersistenVolumeClaims creation requests")
