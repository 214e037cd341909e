"""The CIDR sets' Prometheus metrics (``pkg/controller/nodeipam/ipam/cidrset/metrics.go``), on the default
registry, registered once at import with upstream's names, types and labels (subsystem ``node_ipam_controller``,
label ``clusterCIDR``: the cluster CIDR as written by Go, e.g. ``10.244.0.0/16``):

- ``cidrset_cidrs_allocations_total``: node subnets marked taken (handed out or occupied);
- ``cidrset_cidrs_releases_total``: node subnets freed;
- ``cirdset_max_cidrs`` (sic, upstream's spelling): how many node subnets the set has;
- ``cidrset_usage_cidrs``: the share of them taken (0 to 1);
- ``cidrset_allocation_tries_per_request``: taken subnets skipped before a free one was found (buckets 1, 5,
  25, 125, 625). Its help text is upstream's, copy-paste slip included.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CIDRSET_ALLOCATIONS = Counter(
    "node_ipam_controller_cidrset_cidrs_allocations_total",
    "Counter measuring total number of CIDR allocations.", ["clusterCIDR"])
CIDRSET_RELEASES = Counter(
    "node_ipam_controller_cidrset_cidrs_releases_total",
    "Counter measuring total number of CIDR releases.", ["clusterCIDR"])
CIDRSET_MAX_CIDRS = Gauge(
    "node_ipam_controller_cirdset_max_cidrs",
    "Maximum number of CIDRs that can be allocated.", ["clusterCIDR"])
CIDRSET_USAGE = Gauge(
    "node_ipam_controller_cidrset_usage_cidrs",
    "Gauge measuring percentage of allocated CIDRs.", ["clusterCIDR"])
CIDRSET_ALLOCATION_TRIES = Histogram(
    "node_ipam_controller_cidrset_allocation_tries_per_request",
    "Number of endpoints added on each Service sync", ["clusterCIDR"],
    buckets=(1.0, 5.0, 25.0, 125.0, 625.0))
