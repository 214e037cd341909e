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
    # leader election
    leader_elect: bool = True
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    leader_elect_resource_lock: str = "leases"
    leader_elect_resource_name: str = DEFAULT_LEASE_NAME
    leader_elect_resource_namespace: str = "kube-system"
    # secure serving and delegated auth
    secure_port: int = 10257
    bind_address: str = "0.0.0.0"
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
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
    concurrent_service_endpoint_syncs: int = 5
    mirroring_concurrent_service_endpoint_syncs: int = 5
    max_endpoints_per_slice: int = 100
    concurrent_gc_syncs: int = 20
    enable_garbage_collector: bool = True
    concurrent_namespace_syncs: int = 10
    namespace_sync_period: float = 5 * 60.0
    concurrent_ttl_after_finished_syncs: int = 5
    concurrent_resource_quota_syncs: int = 5
    concurrent_serviceaccount_token_syncs: int = 5
    concurrent_horizontal_pod_autoscaler_syncs: int = 5
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
    # logging
    log_format: str = "json"
    v: int = 0

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
    metavar = {_DURATION: "duration", _BOOL: "bool", _SLICE: "strings", _INT: "int", _FLOAT: "float"}.get(
        convert, "string"
    )
    return _Flag(name, convert, default, help, metavar)


def _str(text: str) -> str:
    return text


_GROUPS: tuple[tuple[str, tuple[_Flag, ...]], ...] = (
    ("Generic flags", (
        _flag("kubeconfig", _str, "", "Path to kubeconfig file with authorization and master location information "
              "(the API server URL). Empty: $KUBECONFIG, ~/.kube/config, then the in-cluster service account."),
        _flag("master", _str, "", "The address of the Kubernetes API server (overrides any value in kubeconfig)."),
        _flag("controllers", _SLICE, "*", "A list of controllers to enable. '*' enables all on-by-default "
              "controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'."),
        _flag("kube-api-qps", _FLOAT, "20", "QPS to use while talking with kubernetes apiserver."),
        _flag("kube-api-burst", _INT, "30", "Burst to use while talking with kubernetes apiserver."),
        _flag("min-resync-period", _DURATION, "12h", "The resync period in reflectors will be random between "
              "MinResyncPeriod and 2*MinResyncPeriod."),
    )),
    ("Leader election flags", (
        _flag("leader-elect", _BOOL, "true", "Start a leader election client and gain leadership before executing "
              "the main loop. Enable this when running replicated components for high availability."),
        _flag("leader-elect-lease-duration", _DURATION, "15s", "The duration that non-leader candidates will wait "
              "after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed "
              "leader slot."),
        _flag("leader-elect-renew-deadline", _DURATION, "10s", "The interval between attempts by the acting master "
              "to renew a leadership slot before it stops leading. Must be less than the lease duration."),
        _flag("leader-elect-retry-period", _DURATION, "2s", "The duration the clients should wait between attempting "
              "acquisition and renewal of a leadership."),
        _flag("leader-elect-resource-lock", _str, "leases", "The type of resource object that is used for locking "
              "during leader election. Supported options are 'leases'."),
        _flag("leader-elect-resource-name", _str, DEFAULT_LEASE_NAME, "The name of resource object that is used for "
              "locking during leader election."),
        _flag("leader-elect-resource-namespace", _str, "kube-system", "The namespace of resource object that is used "
              "for locking during leader election."),
    )),
    ("Secure serving flags", (
        _flag("secure-port", _INT, "10257", "The port on which to serve HTTPS with authentication and authorization. "
              "If 0, don't serve HTTPS at all."),
        _flag("bind-address", _str, "0.0.0.0", "The IP address on which to listen for the --secure-port port."),
        _flag("tls-cert-file", _str, "", "File containing the default x509 Certificate for HTTPS. If HTTPS serving "
              "is enabled and no file is given, a self-signed certificate is generated in memory."),
        _flag("tls-private-key-file", _str, "", "File containing the default x509 private key matching "
              "--tls-cert-file."),
        _flag("authorization-always-allow-paths", _SLICE, "/healthz,/readyz,/livez", "A list of HTTP paths to skip "
              "during authorization, i.e. these are authorized without contacting the 'core' kubernetes server."),
    )),
    ("Controller flags", (
        _flag("concurrent-deployment-syncs", _INT, "5", "The number of deployment objects that are allowed to sync "
              "concurrently. Larger number = more responsive deployments, but more CPU (and network) load."),
        _flag("concurrent-replicaset-syncs", _INT, "5", "The number of replica sets that are allowed to sync "
              "concurrently."),
        _flag("concurrent-rc-syncs", _INT, "5", "The number of replication controllers that are allowed to sync "
              "concurrently."),
        _flag("concurrent-daemonset-syncs", _INT, "2", "The number of daemonset objects that are allowed to sync "
              "concurrently."),
        _flag("concurrent-job-syncs", _INT, "5", "The number of job objects that are allowed to sync concurrently."),
        _flag("concurrent-cron-job-syncs", _INT, "5", "The number of cron job objects that are allowed to sync "
              "concurrently."),
        _flag("concurrent-statefulset-syncs", _INT, "5", "The number of statefulset objects that are allowed to "
              "sync concurrently."),
        _flag("concurrent-endpoint-syncs", _INT, "5", "The number of endpoint syncing operations that will be done "
              "concurrently."),
        _flag("concurrent-service-endpoint-syncs", _INT, "5", "The number of service endpoint syncing operations "
              "that will be done concurrently (EndpointSlice controller)."),
        _flag("mirroring-concurrent-service-endpoint-syncs", _INT, "5", "The number of service endpoint syncing "
              "operations that will be done concurrently by the endpointslice-mirroring-controller."),
        _flag("max-endpoints-per-slice", _INT, "100", "The maximum number of endpoints that will be added to an "
              "EndpointSlice."),
        _flag("concurrent-gc-syncs", _INT, "20", "The number of garbage collector workers that are allowed to sync "
              "concurrently."),
        _flag("enable-garbage-collector", _BOOL, "true", "Enables the generic garbage collector. MUST be synced with "
              "the corresponding flag of the kube-apiserver."),
        _flag("concurrent-namespace-syncs", _INT, "10", "The number of namespace objects that are allowed to sync "
              "concurrently."),
        _flag("namespace-sync-period", _DURATION, "5m", "The period for syncing namespace life-cycle updates."),
        _flag("concurrent-ttl-after-finished-syncs", _INT, "5", "The number of ttl-after-finished-controller workers "
              "that are allowed to sync concurrently."),
        _flag("concurrent-resource-quota-syncs", _INT, "5", "The number of resource quotas that are allowed to sync "
              "concurrently."),
        _flag("concurrent-serviceaccount-token-syncs", _INT, "5", "The number of service account token objects that "
              "are allowed to sync concurrently."),
        _flag("concurrent-horizontal-pod-autoscaler-syncs", _INT, "5", "The number of horizontal pod autoscaler "
              "objects that are allowed to sync concurrently."),
        _flag("node-monitor-period", _DURATION, "5s", "The period for syncing NodeStatus in cloud-node-lifecycle-"
              "controller."),
        _flag("node-monitor-grace-period", _DURATION, "50s", "Amount of time which we allow running Node to be "
              "unresponsive before marking it unhealthy."),
        _flag("node-startup-grace-period", _DURATION, "1m", "Amount of time which we allow starting Node to be "
              "unresponsive before marking it unhealthy."),
        _flag("node-eviction-rate", _FLOAT, "0.1", "Number of nodes per second on which pods are deleted in case of "
              "node failure when a zone is healthy."),
        _flag("secondary-node-eviction-rate", _FLOAT, "0.01", "Number of nodes per second on which pods are deleted "
              "in case of node failure when a zone is unhealthy. Zeroed out if the cluster size is smaller than "
              "--large-cluster-size-threshold."),
        _flag("large-cluster-size-threshold", _INT, "50", "Number of nodes from which node-lifecycle-controller "
              "treats the cluster as large for the eviction logic purposes."),
        _flag("unhealthy-zone-threshold", _FLOAT, "0.55", "Fraction of Nodes in a zone which needs to be not Ready "
              "(minimum 3) for zone to be treated as unhealthy."),
        _flag("terminated-pod-gc-threshold", _INT, "12500", "Number of terminated pods that can exist before the "
              "terminated pod garbage collector starts deleting terminated pods. If <= 0, it is disabled."),
    )),
    ("Logging flags", (
        _flag("log-format", _str, "json", "Sets the log format. Permitted formats: \"json\", \"text\"."),
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
            if flag.name == "log-format":
                kwargs["choices"] = ("json", "text")
            group.add_argument(f"--{flag.name}", **kwargs)
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
    return errors
