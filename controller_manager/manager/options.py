"""Command-line flags of the daemon, named and defaulted as kube-controller-manager names them.

Guarantees:
- Every flag keeps upstream's spelling (``--leader-elect-lease-duration``, ``--concurrent-deployment-syncs``,
  ...) and default; ``controller-manager --help`` lists each with its default.
- Durations use Go's ``time.ParseDuration`` syntax (``15s``, ``1m``, ``500ms``, ``1h30m``) and are held as
  float seconds. Booleans take pflag's forms (``--leader-elect``, ``--leader-elect=false``).
- :func:`parse_options` never prints or exits on a bad value: it raises :class:`OptionsError` carrying one
  line, which ``main`` writes to stderr (exit 1). ``--help`` alone prints and exits 0, as argparse does.
- Validation that upstream does after parsing (``resourceLock value must be "leases"``, unknown controller
  names, paired TLS files, port range) happens here too, so a process that starts has coherent options.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, NoReturn

from controller_manager.manager import features

# The Lease this daemon competes for. Deliberately not "kube-controller-manager": running beside the real
# one must never steal or block its lease.
DEFAULT_LEASE_NAME = "controller-manager-py"

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # U+00B5 micro sign, as Go accepts
    "\u03bcs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_NUMBER = re.compile(r"(\d*)(?:\.(\d*))?")


class OptionsError(ValueError):
    """A flag could not be parsed or the parsed options are inconsistent. ``str()`` is one line."""


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string (``time.ParseDuration``): ``"1h30m"`` -> 5400.0, ``"0"`` -> 0.0."""
    original = text
    s = text
    negative = False
    if s[:1] in ("+", "-"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f'time: invalid duration "{original}"')
    total = 0.0
    while s:
        match = _NUMBER.match(s)
        assert match is not None  # the pattern can match the empty string, so it always matches
        whole, frac = match.group(1), match.group(2)
        if not whole and not frac:
            raise ValueError(f'time: invalid duration "{original}"')
        s = s[match.end():]
        end = 0
        while end < len(s) and s[end] != "." and not s[end].isdigit():
            end += 1
        unit, s = s[:end], s[end:]
        if not unit:
            raise ValueError(f'time: missing unit in duration "{original}"')
        if unit not in _UNIT_SECONDS:
            raise ValueError(f'time: unknown unit "{unit}" in duration "{original}"')
        total += float(f"{whole or '0'}.{frac or '0'}") * _UNIT_SECONDS[unit]
    return -total if negative else total


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool`` forms, which pflag uses for ``--flag=value``."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def parse_string_slice(text: str) -> list[str]:
    """pflag's StringSlice: comma-separated; the empty string is the empty list."""
    return [] if text == "" else text.split(",")


def _typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a parser so argparse reports its message (not just "invalid value")."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None


_DURATION = _typed(parse_duration)
_BOOL = _typed(parse_bool)
_SLICE = _typed(parse_string_slice)
_GATES = _typed(features.parse_feature_gates)
_INT = _typed(_int)
_FLOAT = _typed(_float)


@dataclass(frozen=True, slots=True)
class Options:
    """Parsed flags. Attribute names are the flag names with ``-`` as ``_``; durations are seconds."""

    # generic
    kubeconfig: str = ""
    master: str = ""
    controllers: tuple[str, ...] = ("*",)
    kube_api_qps: float = 20.0
    kube_api_burst: int = 30
    min_resync_period: float = 12 * 3600.0
    feature_gates: features.Overrides = ()  # only the gates given; features.enabled() adds the defaults
    # leader election
    leader_elect: bool = True
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    leader_elect_resource_lock: str = "leases"
    leader_elect_resource_name: str = DEFAULT_LEASE_NAME
    leader_elect_resource_namespace: str = "kube-system"
    # sharding (not upstream: horizontal scale of the workload controllers, docs/sharding.md)
    sharding: bool = False
    sharding_ring_name: str = ""
    sharding_sharder_workers: int = 5
    sharding_leader_share: float = 1.0
    # secure serving and delegated auth
    secure_port: int = 10257
    bind_address: str = "0.0.0.0"
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    root_ca_file: str = ""
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
    # per-controller concurrency
    concurrent_deployment_syncs: int = 5
    concurrent_replicaset_syncs: int = 5
    concurrent_rc_syncs: int = 5
    concurrent_daemonset_syncs: int = 2
    concurrent_job_syncs: int = 5
    concurrent_cron_job_syncs: int = 5
    concurrent_statefulset_syncs: int = 5
    concurrent_endpoint_syncs: int = 5
    endpoint_updates_batch_period: float = 0.0
    concurrent_service_endpoint_syncs: int = 5
    mirroring_concurrent_service_endpoint_syncs: int = 5
    mirroring_max_endpoints_per_subset: int = 1000
    mirroring_endpointslice_updates_batch_period: float = 0.0
    max_endpoints_per_slice: int = 100
    endpointslice_updates_batch_period: float = 0.0
    concurrent_gc_syncs: int = 20
    enable_garbage_collector: bool = True
    concurrent_namespace_syncs: int = 10
    namespace_sync_period: float = 5 * 60.0
    concurrent_ttl_after_finished_syncs: int = 5
    concurrent_resource_quota_syncs: int = 5
    resource_quota_sync_period: float = 5 * 60.0
    concurrent_serviceaccount_token_syncs: int = 5
    service_account_private_key_file: str = ""
    legacy_service_account_token_clean_up_period: float = 8760 * 3600.0
    concurrent_horizontal_pod_autoscaler_syncs: int = 5
    horizontal_pod_autoscaler_sync_period: float = 15.0
    horizontal_pod_autoscaler_downscale_stabilization: float = 5 * 60.0
    horizontal_pod_autoscaler_tolerance: float = 0.1
    horizontal_pod_autoscaler_cpu_initialization_period: float = 5 * 60.0
    horizontal_pod_autoscaler_initial_readiness_delay: float = 30.0
    concurrent_ephemeralvolume_syncs: int = 5
    # CSR signing
    cluster_signing_cert_file: str = ""
    cluster_signing_key_file: str = ""
    cluster_signing_kubelet_serving_cert_file: str = ""
    cluster_signing_kubelet_serving_key_file: str = ""
    cluster_signing_kubelet_client_cert_file: str = ""
    cluster_signing_kubelet_client_key_file: str = ""
    cluster_signing_kube_apiserver_client_cert_file: str = ""
    cluster_signing_kube_apiserver_client_key_file: str = ""
    cluster_signing_legacy_unknown_cert_file: str = ""
    cluster_signing_legacy_unknown_key_file: str = ""
    cluster_signing_duration: float = 8760 * 3600.0
    # node lifecycle
    node_monitor_period: float = 5.0
    node_monitor_grace_period: float = 50.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55
    # pod GC
    terminated_pod_gc_threshold: int = 12500
    # persistent volume binder
    pvclaimbinder_sync_period: float = 15.0
    enable_dynamic_provisioning: bool = True
    enable_hostpath_provisioner: bool = False
    # node IPAM (0 mask sizes: the per-family defaults, 24 for IPv4 and 64 for IPv6)
    allocate_node_cidrs: bool = False
    cluster_cidr: str = ""
    cidr_allocator_type: str = "RangeAllocator"
    node_cidr_mask_size: int = 0
    node_cidr_mask_size_ipv4: int = 0
    node_cidr_mask_size_ipv6: int = 0
    service_cluster_ip_range: str = ""
    # attach/detach
    disable_attach_detach_reconcile_sync: bool = False
    attach_detach_reconcile_sync_period: float = 60.0
    disable_force_detach_on_timeout: bool = False
    # logging
    log_format: str = "json"
    v: int = 0

    def feature_enabled(self, gate: str) -> bool:
        """Whether a known feature gate (``features.KNOWN``) is on, by --feature-gates or by default."""
        return features.enabled(self.feature_gates, gate)

    def value(self, flag: str) -> Any:
        """The value of a flag by its command-line name: ``value("concurrent-replicaset-syncs")``."""
        attr = flag.removeprefix("--").replace("-", "_")
        if attr not in _FIELD_NAMES:
            raise KeyError(flag)
        return getattr(self, attr)


EMPTY = "''"  # how --help shows an empty default

_FIELD_NAMES = frozenset(f.name for f in fields(Options))


@dataclass(frozen=True, slots=True)
class _Flag:
    name: str
    convert: Callable[[str], Any]
    default: str  # as the user would type it: shown in --help and parsed like user input
    help: str
    metavar: str


def _flag(name: str, convert: Callable[[str], Any], default: str, help: str) -> _Flag:
    metavar = {_DURATION: "duration", _BOOL: "bool", _SLICE: "strings", _INT: "int", _FLOAT: "float",
               _GATES: "mapStringBool"}.get(
        convert, "string"
    )
    return _Flag(name, convert, default, help, metavar)


def _str(text: str) -> str:
    return text


_GROUPS: tuple[tuple[str, tuple[_Flag, ...]], ...] = (
    ("Generic flags", (
        _flag("kubeconfig", _str, "",
              "Kubeconfig file giving the API server's address and the credentials to use. Empty: "
              "$KUBECONFIG, then ~/.kube/config, then the pod's service account (in-cluster)."),
        _flag("master", _str, "",
              'API server URL; when set it wins over the server named in the kubeconfig.'),
        _flag("controllers", _SLICE, "*",
              "Which controllers run, as a comma list read left to right: '*' turns on every controller"
              " that is on by default, 'name' turns one on, '-name' turns one off. Canonical names and "
              'their short aliases are both accepted.'),
        _flag("kube-api-qps", _FLOAT, "20",
              'Steady requests per second this process may send to the API server (client-side limit).'),
        _flag("kube-api-burst", _INT, "30",
              'Requests this process may send at once above --kube-api-qps before it is throttled.'),
        _flag("min-resync-period", _DURATION, "12h",
              'Informers replay their whole cache to the controllers after a random period between this'
              ' and twice this.'),
        _flag("feature-gates", _GATES, "",
              'A set of key=value pairs that describe feature gates for alpha/experimental features. Options '
              'are: ' + "; ".join(features.known_features()) + ". WatchListClient: informers list through a "
              'watch (sendInitialEvents) instead of paged lists, falling back to pages when the server refuses.'),
    )),
    ("Leader election flags", (
        _flag("leader-elect", _BOOL, "true",
              'Run only while holding the leader Lease, so several replicas can run for availability '
              'with one active.'),
        _flag("leader-elect-lease-duration", _DURATION, "15s",
              'How long a standby waits, after last seeing the leader renew, before it may take the '
              'Lease over.'),
        _flag("leader-elect-renew-deadline", _DURATION, "10s",
              'How long the leader keeps trying to renew before it gives up leading (and exits). Less '
              'than the lease duration.'),
        _flag("leader-elect-retry-period", _DURATION, "2s",
              'Pause between two attempts to acquire or renew the Lease.'),
        _flag("leader-elect-resource-lock", _str, "leases",
              "Kind of object holding the lock; only 'leases' is supported."),
        _flag("leader-elect-resource-name", _str, DEFAULT_LEASE_NAME,
              "Name of the Lease. The default never clashes with kube-controller-manager's; set 'kube-"
              "controller-manager' to take turns with it on one Lease."),
        _flag("leader-elect-resource-namespace", _str, "kube-system",
              'Namespace of the Lease.'),
    )),
    ("Sharding flags", (
        _flag("sharding", _BOOL, "false",
              'Spread the workload controllers (deployment, replicaset, statefulset, daemonset, job, cronjob) '
              'over every replica: each holds a shard Lease, the leader assigns objects to shards by consistent '
              'hashing, and each replica watches and syncs only its own. Off: one leader runs everything.'),
        _flag("sharding-ring-name", _str, "",
              'Name of the ring the replicas share (label values on shard Leases and objects); empty: the leader '
              "Lease's name."),
        _flag("sharding-sharder-workers", _INT, "5",
              'Workers of the sharder (on the leader), which labels and moves objects between shards.'),
        _flag("sharding-leader-share", _FLOAT, "1",
              "The leader's share of the workload objects, relative to another member's (the leader also runs "
              'every cluster-wide controller): 1 an equal share, 0.5 half of one, 0 none while another member is '
              'live. Between 0 and 1.'),
    )),
    ("Secure serving flags", (
        _flag("secure-port", _INT, "10257",
              'HTTPS port for /metrics, /healthz, /livez and /readyz (with delegated authentication and'
              ' authorization); 0 turns serving off.'),
        _flag("bind-address", _str, "0.0.0.0",
              'Address the HTTPS server listens on.'),
        _flag("tls-cert-file", _str, "",
              'Serving certificate (PEM). Without one a self-signed certificate is made in memory at '
              'start.'),
        _flag("tls-private-key-file", _str, "",
              'Private key (PEM) of --tls-cert-file.'),
        _flag("root-ca-file", _str, "",
              'If set, this root certificate authority is the CA bundle published to every namespace as the '
              'kube-root-ca.crt ConfigMap (a valid PEM-encoded CA bundle); without it, the CA that verifies the '
              'API server in the kubeconfig.'),
        _flag("authorization-always-allow-paths", _SLICE, "/healthz,/readyz,/livez",
              'Paths served to anyone, with no TokenReview or SubjectAccessReview.'),
    )),
    ("Controller flags", (
        _flag("concurrent-deployment-syncs", _INT, "5",
              'Deployments synced in parallel (workers); more is faster to react but costs CPU and API '
              'calls.'),
        _flag("concurrent-replicaset-syncs", _INT, "5",
              'ReplicaSets synced in parallel (workers).'),
        _flag("concurrent-rc-syncs", _INT, "5",
              'ReplicationControllers synced in parallel (workers).'),
        _flag("concurrent-daemonset-syncs", _INT, "2",
              'DaemonSets synced in parallel (workers).'),
        _flag("concurrent-job-syncs", _INT, "5",
              'Jobs synced in parallel (workers).'),
        _flag("concurrent-cron-job-syncs", _INT, "5",
              'CronJobs synced in parallel (workers).'),
        _flag("concurrent-statefulset-syncs", _INT, "5",
              'StatefulSets synced in parallel (workers).'),
        _flag("concurrent-endpoint-syncs", _INT, "5",
              'Services whose Endpoints are synced in parallel (workers).'),
        _flag("endpoint-updates-batch-period", _DURATION, "0s",
              "How long pod changes are gathered before a Service's Endpoints is rewritten (0: at once)."),
        _flag("concurrent-service-endpoint-syncs", _INT, "5",
              'Services whose EndpointSlices are synced in parallel (workers).'),
        _flag("mirroring-concurrent-service-endpoint-syncs", _INT, "5",
              'Services synced in parallel by the EndpointSlice mirroring controller (workers).'),
        _flag("mirroring-max-endpoints-per-subset", _INT, "1000",
              'Upper bound on the addresses of one Endpoints subset the mirroring controller copies into '
              'EndpointSlices; the rest are skipped (a TooManyAddressesToMirror event says how many).'),
        _flag("mirroring-endpointslice-updates-batch-period", _DURATION, "0s",
              'How long EndpointSlice changes are gathered before the mirroring controller syncs their Endpoints '
              'again (0: at once).'),
        _flag("max-endpoints-per-slice", _INT, "100",
              'Upper bound on endpoints written into one EndpointSlice.'),
        _flag("endpointslice-updates-batch-period", _DURATION, "0s",
              'How long pod changes are gathered before a Service\'s EndpointSlices are rewritten (0: at once).'),
        _flag("concurrent-gc-syncs", _INT, "20",
              'Garbage-collector workers deleting or orphaning dependents in parallel.'),
        _flag("enable-garbage-collector", _BOOL, "true",
              "Run the garbage collector; keep in step with the API server's own setting."),
        _flag("concurrent-namespace-syncs", _INT, "10",
              'Namespaces being emptied and finalized in parallel (workers).'),
        _flag("namespace-sync-period", _DURATION, "5m",
              'How often every namespace is looked at again, whatever changed.'),
        _flag("concurrent-ttl-after-finished-syncs", _INT, "5",
              'Finished Jobs checked for expiry in parallel (workers).'),
        _flag("concurrent-resource-quota-syncs", _INT, "5",
              'ResourceQuotas synced in parallel (workers).'),
        _flag("resource-quota-sync-period", _DURATION, "5m",
              'How often every quota\'s usage is recalculated in full, whatever changed (0 disables it).'),
        _flag("concurrent-serviceaccount-token-syncs", _INT, "5",
              'Service-account token Secrets synced in parallel (workers).'),
        _flag("service-account-private-key-file", _str, "",
              'PEM file holding the RSA or ECDSA private key that signs the legacy tokens written into '
              'kubernetes.io/service-account-token Secrets; the serviceaccount-token-controller runs only when it '
              'is set.'),
        _flag("legacy-service-account-token-clean-up-period", _DURATION, "8760h0m0s",
              'How long an auto-generated legacy ServiceAccount token may go unused before it is labelled invalid, '
              'and then stay invalid before it is deleted.'),
        _flag("concurrent-horizontal-pod-autoscaler-syncs", _INT, "5",
              'HorizontalPodAutoscalers synced in parallel (workers).'),
        _flag("horizontal-pod-autoscaler-sync-period", _DURATION, "15s",
              'How often every HorizontalPodAutoscaler is reconciled (its metrics read, its target rescaled).'),
        _flag("horizontal-pod-autoscaler-downscale-stabilization", _DURATION, "5m",
              'How far back an HPA without behavior looks for a higher recommendation before it scales down.'),
        _flag("horizontal-pod-autoscaler-tolerance", _FLOAT, "0.1",
              'Minimum relative gap between a metric and its target before an HPA rescales; an HPA\'s '
              'behavior may set its own per direction.'),
        _flag("horizontal-pod-autoscaler-cpu-initialization-period", _DURATION, "5m",
              'How long after a pod starts its CPU samples are skipped unless it is Ready and a full sample '
              'window has passed since it became Ready.'),
        _flag("horizontal-pod-autoscaler-initial-readiness-delay", _DURATION, "30s",
              'How long after a pod starts a change of its readiness still counts as its first readiness.'),
        _flag("concurrent-ephemeralvolume-syncs", _INT, "5",
              'Pods whose generic ephemeral volumes get their claims in parallel (workers).'),
        _flag("cluster-signing-cert-file", _str, "",
              'PEM-encoded X509 CA certificate used to issue cluster-scoped certificates for every kubernetes.io '
              'signer. If specified, no more specific --cluster-signing-* flag may be set.'),
        _flag("cluster-signing-key-file", _str, "",
              'PEM-encoded RSA or ECDSA private key of --cluster-signing-cert-file. If specified, no more '
              'specific --cluster-signing-* flag may be set.'),
        _flag("cluster-signing-kubelet-serving-cert-file", _str, "",
              'PEM-encoded X509 CA certificate used to issue certificates'
              ' for the kubernetes.io/kubelet-serving signer. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-kubelet-serving-key-file", _str, "",
              'PEM-encoded private key of --cluster-signing-kubelet-serving-cert-file. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-kubelet-client-cert-file", _str, "",
              'PEM-encoded X509 CA certificate used to issue certificates'
              ' for the kubernetes.io/kube-apiserver-client-kubelet signer. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-kubelet-client-key-file", _str, "",
              'PEM-encoded private key of --cluster-signing-kubelet-client-cert-file. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-kube-apiserver-client-cert-file", _str, "",
              'PEM-encoded X509 CA certificate used to issue certificates'
              ' for the kubernetes.io/kube-apiserver-client signer. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-kube-apiserver-client-key-file", _str, "",
              'PEM-encoded private key of --cluster-signing-kube-apiserver-client-cert-file. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-legacy-unknown-cert-file", _str, "",
              'PEM-encoded X509 CA certificate used to issue certificates'
              ' for the kubernetes.io/legacy-unknown signer. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-legacy-unknown-key-file", _str, "",
              'PEM-encoded private key of --cluster-signing-legacy-unknown-cert-file. '
              'If specified, --cluster-signing-{cert,key}-file must not be set.'),
        _flag("cluster-signing-duration", _DURATION, "8760h0m0s",
              'The max length of duration signed certificates will be given. Individual CSRs may request shorter '
              'certs by setting spec.expirationSeconds.'),
        _flag("node-monitor-period", _DURATION, "5s",
              "How often the node lifecycle controller checks every node's heartbeats."),
        _flag("node-monitor-grace-period", _DURATION, "50s",
              'How long a running node may go without a heartbeat (status or Lease) before it is marked'
              ' unhealthy.'),
        _flag("node-startup-grace-period", _DURATION, "1m",
              'The same allowance for a node that has just registered.'),
        _flag("node-eviction-rate", _FLOAT, "0.1",
              'Nodes per second whose pods may be evicted when their zone is healthy.'),
        _flag("secondary-node-eviction-rate", _FLOAT, "0.01",
              'Nodes per second whose pods may be evicted when their zone is unhealthy; 0 in clusters '
              'of at most --large-cluster-size-threshold nodes.'),
        _flag("large-cluster-size-threshold", _INT, "50",
              'Node count above which a zone counts as large for the eviction rates.'),
        _flag("unhealthy-zone-threshold", _FLOAT, "0.55",
              'Share of not-Ready nodes (at least 3) that makes a zone unhealthy.'),
        _flag("terminated-pod-gc-threshold", _INT, "12500",
              'Finished pods kept before the pod garbage collector deletes the oldest; 0 or less keeps '
              'them all.'),
    )),
    ("PersistentVolume-binder controller flags", (
        _flag("pvclaimbinder-sync-period", _DURATION, "15s",
              'The period for syncing persistent volumes and persistent volume claims.'),
        _flag("enable-dynamic-provisioning", _BOOL, "true",
              'Enable dynamic provisioning for environments that support it.'),
        _flag("enable-hostpath-provisioner", _BOOL, "false",
              'Enable HostPath PV provisioning when running without a cloud provider. This allows testing and '
              'development of provisioning features. HostPath provisioning is not supported in any way, won\'t '
              'work in a multi-node cluster, and should not be used for anything other than testing or '
              'development.'),
    )),
    ("Node IPAM flags", (
        _flag("allocate-node-cidrs", _BOOL, "false",
              'Give every Node its pod CIDRs (spec.podCIDR and spec.podCIDRs) out of --cluster-cidr; '
              'without it the node-ipam-controller does not run.'),
        _flag("cluster-cidr", _str, "",
              'The pods\' address range, one CIDR or an IPv4 and an IPv6 CIDR separated by a comma (dual-stack);'
              ' read only with --allocate-node-cidrs.'),
        _flag("cidr-allocator-type", _str, "RangeAllocator",
              "How node CIDRs are chosen; only 'RangeAllocator' (out of --cluster-cidr) is supported."),
        _flag("node-cidr-mask-size", _INT, "0",
              'Prefix length of each node\'s pod CIDR in a single-stack cluster; 0 means 24 for IPv4 and 64 '
              'for IPv6.'),
        _flag("node-cidr-mask-size-ipv4", _INT, "0",
              'Prefix length of each node\'s IPv4 pod CIDR; 0 means 24.'),
        _flag("node-cidr-mask-size-ipv6", _INT, "0",
              'Prefix length of each node\'s IPv6 pod CIDR; 0 means 64.'),
        _flag("service-cluster-ip-range", _str, "",
              'The Services\' address range (a second CIDR of the other family after a comma for dual-stack),'
              ' kept out of the node CIDRs; read only with --allocate-node-cidrs.'),
    )),
    ("AttachDetachController flags", (
        _flag("disable-attach-detach-reconcile-sync", _BOOL, "false",
              'Never check the attached volumes against their VolumeAttachments (volumes may then stay out of '
              'step with pods).'),
        _flag("attach-detach-reconcile-sync-period", _DURATION, "1m0s",
              'How often the attach/detach controller checks the volumes it believes attached against their '
              'VolumeAttachments; at least one second (longer lets volumes drift from pods for longer).'),
        _flag("disable-force-detach-on-timeout", _BOOL, "false",
              'Never detach a volume a node still reports mounted, even once the node is unhealthy and the '
              'maximum unmount wait has passed (recovering from a lost node then needs the out-of-service taint).'),
    )),
    ("Logging flags", (
        _flag("log-format", _str, "json",
              'Log line format: "json" (default, one object per line) or "text" (for people).'),
    )),
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage dump: argparse's default prints usage and exits 2 from deep inside.
        raise OptionsError(message)


class _HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=40, width=110)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Never break inside hyphenated names: "deployment-controller" must stay greppable in --help.
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser(
    known_controllers: Sequence[str] = (), disabled_by_default: Sequence[str] = ()
) -> argparse.ArgumentParser:
    """The argparse parser. The controller lists only enrich ``--controllers``'s help text."""
    parser = _Parser(
        prog="controller-manager",
        description="An asyncio-native Kubernetes controller manager: the control loops of kube-controller-manager.",
        allow_abbrev=False,  # pflag never accepts abbreviations
        formatter_class=_HelpFormatter,
    )
    for title, flags in _GROUPS:
        group = parser.add_argument_group(title)
        for flag in flags:
            text = flag.help
            if flag.name == "controllers" and known_controllers:
                text += f" All controllers: {', '.join(known_controllers)}."
                text += f" Disabled-by-default controllers: {', '.join(disabled_by_default)}."
            kwargs: dict[str, Any] = {
                "dest": flag.name.replace("-", "_"),
                "type": flag.convert,
                "default": flag.default,  # argparse runs string defaults through `type`
                "metavar": flag.metavar,
                "help": f"{text} (default: {flag.default or EMPTY})",
            }
            if flag.convert is _BOOL:
                kwargs["nargs"] = "?"
                kwargs["const"] = True  # a bare --leader-elect means true
            if flag.convert is _GATES:
                # Each --feature-gates adds its pairs to the earlier ones' (pflag calls Set per occurrence).
                kwargs["action"] = "append"
                kwargs["default"] = []
            names = [f"--{flag.name}"]
            if flag.name == "log-format":
                kwargs["choices"] = ("json", "text")
                names.append("--logging-format")  # kube-controller-manager's (component-base) spelling
            group.add_argument(*names, **kwargs)
        if title == "Logging flags":
            group.add_argument("-v", "--v", dest="v", type=_INT, default="0", metavar="Level",
                               help="number for the log level verbosity: 0 info, >= 4 debug (default: 0)")
    return parser


def parse_options(
    argv: Sequence[str],
    known_controllers: Sequence[str] = (),
    disabled_by_default: Sequence[str] = (),
) -> Options:
    """Parse and validate flags; raise :class:`OptionsError` (one line) on any problem.

    Controller-name validation happens in :mod:`controller_manager.manager.registry`, which knows the names.
    """
    parser = build_parser(known_controllers, disabled_by_default)
    namespace = parser.parse_args(list(argv))
    values = vars(namespace)
    values["controllers"] = tuple(values["controllers"])
    values["authorization_always_allow_paths"] = tuple(values["authorization_always_allow_paths"])
    values["feature_gates"] = features.merge(values["feature_gates"])
    options = Options(**values)
    errors = validate(options)
    if errors:
        raise OptionsError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return options


def validate(options: Options) -> list[str]:
    """Cross-flag checks upstream makes before starting (messages as upstream words them where it has them)."""
    errors: list[str] = []
    if options.leader_elect and options.leader_elect_resource_lock != "leases":
        errors.append('resourceLock value must be "leases"')
    if options.leader_elect:
        if options.leader_elect_lease_duration <= options.leader_elect_renew_deadline:
            errors.append("leaseDuration must be greater than renewDeadline")
        if options.leader_elect_renew_deadline <= options.leader_elect_retry_period * 1.2:
            errors.append("renewDeadline must be greater than retryPeriod*JitterFactor")
        if options.leader_elect_retry_period <= 0:
            errors.append("retryPeriod must be greater than zero")
    if options.sharding and not options.leader_elect:
        errors.append("--sharding requires --leader-elect")
    if options.sharding_sharder_workers < 1:
        errors.append("--sharding-sharder-workers must be at least 1")
    if not 0 <= options.sharding_leader_share <= 1:
        errors.append(f"--sharding-leader-share {options.sharding_leader_share} must be between 0 and 1")
    if not 0 <= options.secure_port <= 65535:
        errors.append(f"--secure-port {options.secure_port} must be between 0 and 65535, inclusive. 0 for turning "
                      "off secure port")
    if bool(options.tls_cert_file) != bool(options.tls_private_key_file):
        errors.append("--tls-cert-file and --tls-private-key-file must be given together")
    if options.kube_api_burst < 0:
        errors.append("--kube-api-burst must not be negative")
    for flag in ("min-resync-period", "leader-elect-lease-duration", "node-monitor-period",
                 "node-monitor-grace-period", "node-startup-grace-period", "namespace-sync-period"):
        if options.value(flag) < 0:
            errors.append(f"--{flag} must not be negative")
    for f in fields(Options):
        if (f.name.startswith("concurrent_") or f.name.endswith("_syncs")) and getattr(options, f.name) < 0:
            errors.append(f"--{f.name.replace('_', '-')} must not be negative")
    # EndpointSliceMirroringControllerOptions.Validate: workers in [1, 50], addresses per subset in [1, 1000].
    for flag, value, low, high in (
            ("mirroring-concurrent-service-endpoint-syncs", options.mirroring_concurrent_service_endpoint_syncs, 1, 50),
            ("mirroring-max-endpoints-per-subset", options.mirroring_max_endpoints_per_subset, 1, 1000)):
        if value < low:
            errors.append(f"{flag} must not be less than {low}, but got {value}")
        elif value > high:
            errors.append(f"{flag} must not be more than {high}, but got {value}")
    if options.attach_detach_reconcile_sync_period < 1.0:
        errors.append("duration time must be greater than one second as set via command line option "
                      "reconcile-sync-loop-period")
    if len(options.service_cluster_ip_range.split(",")) > 2:
        errors.append("--service-cluster-ip-range can not contain more than two entries")
    return errors
