"""``kube-sim``: serve a simulated cluster until SIGTERM/SIGINT.

Guarantees:
- Once the API answers and every node is registered, the kubeconfig is written and exactly one line,
  ``kube-sim ready: <url>``, is printed on stdout (flushed). Everything else (logs) goes to stderr.
- It serves HTTPS with a CA and certificate made at start-up; the kubeconfig trusts that CA and holds
  the admin token (user ``admin``, group ``system:masters``; a ``kube-sim-viewer`` context reads only).
  A request without credentials is ``system:anonymous`` and RBAC denies it (403), unless
  ``--anonymous-admin`` serves such requests as the admin.
- Pods are admitted as kube-apiserver admits them by default, the ServiceAccount plugin included: a pod needs
  its ServiceAccount (``default`` unless named), which kube-controller-manager's serviceaccount controller
  creates in each namespace, and gets the projected token volume. Without such a controller running,
  ``--no-service-account-admission`` turns the plugin off (the in-process ``SimCluster`` and ``ApiServer`` keep
  it off unless asked).
- Storage is simulated unless ``--no-storage``: a CSI driver (``csi.sim.controller-manager.io``, attach
  required) with its CSIDriver, the default StorageClass ``standard``, an external-provisioner and an
  external-attacher acting after ``--storage-provision-delay`` / ``--storage-attach-delay`` seconds, and kubelets
  that publish CSINodes, start pods only once their volumes are attached and report ``volumesInUse``
  (:mod:`controller_manager.sim.storage`).
- SIGUSR1 restarts the watch cache: every open watch is cut (clients resume from their resourceVersion,
  history kept), as a kube-apiserver restart looks to its watchers.
- SIGTERM or SIGINT stops the cluster cleanly and exits 0. Bad flags print one error line on
  stderr and exit 2; a failure to start exits 1.
- ``--audit-log-path FILE`` is kube-sim's equivalent of kube-apiserver's flag with an audit policy whose only
  rule is ``level: Metadata``: one audit.k8s.io/v1 Event per request, at stage ResponseComplete.
- ``--token-auth-file FILE`` adds static bearer tokens as kube-apiserver's flag does (CSV
  ``token,user,uid,"group1,group2"``), e.g. one user per controller-manager replica; a bad file exits 2.
- ``--event-ttl DURATION`` (default ``1h``) is kube-apiserver's: each Event is deleted (a DELETED watch event)
  that long after its last write, give or take the lease sharing of :mod:`apiserver.ttl`.
- Runs on uvloop when it is importable.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import structlog

from controller_manager import gctuning
from controller_manager.clock import RealClock
from controller_manager.sim.apiserver.auth.legacy_tokens import load_public_keys
from controller_manager.sim.apiserver.auth.tokenfile import read_token_file
from controller_manager.sim.apiserver.gojson import GoTypeError, parse_duration
from controller_manager.sim.cluster import SimCluster
from controller_manager.sim.faults import parse_fault_spec
from controller_manager.sim.kubelet import KubeletConfig
from controller_manager.sim.storage import StorageConfig

__all__ = ["main", "parse_args"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be within 0-65535, not {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text}")
    return value


def _event_ttl(text: str) -> float:
    """A Go duration (``1h``, ``90s``, ``0``), as kube-apiserver's --event-ttl takes it; seconds."""
    try:
        ns = parse_duration(text)
    except GoTypeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if ns < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text}")
    return ns / 1e9


def _webhook_service(text: str) -> tuple[str, str]:
    service, sep, address = text.partition("=")
    host, _, port = service.rpartition(":")
    addr_host, _, addr_port = address.rpartition(":")
    if not sep or not host.endswith(".svc") or host.count(".") != 2 or not port.isdigit() or not addr_host \
            or not addr_port.isdigit():
        raise argparse.ArgumentTypeError(f"want <name>.<namespace>.svc:<port>=<host>:<port>, not {text!r}")
    return service, address


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = _Parser(prog="kube-sim", description="A simulated Kubernetes cluster: API server, scheduler, kubelets.")
    p.add_argument("--nodes", type=_non_negative_int, default=3, help="number of nodes (default 3)")
    p.add_argument("--zones", type=_non_negative_int, default=1, help="spread nodes over this many zones")
    p.add_argument("--port", type=_port, default=0, help="port to serve on (0: pick a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--kubeconfig", default="kube-sim.kubeconfig", help="where to write the kubeconfig")
    p.add_argument("--anonymous-admin", action="store_true",
                   help="serve requests without credentials as the admin (default: they are system:anonymous, "
                        "which may read only /healthz, /livez, /readyz and /version)")
    p.add_argument("--no-scheduler", action="store_true", help="run no scheduler")
    p.add_argument("--no-kubelets", action="store_true", help="run no kubelets (and so no nodes)")
    p.add_argument("--no-kubelet-pod-cidr", action="store_true",
                   help="kubelets register their Nodes without spec.podCIDR(s), as real kubelets do, for a "
                        "controller-manager run with --allocate-node-cidrs (default: each Node registers with "
                        "10.244.<n>.0/24)")
    p.add_argument("--aggregate-cluster-roles", action=argparse.BooleanOptionalAction, default=True,
                   help="fill ClusterRoles that have an aggregationRule (admin, edit, view, ...) in the API server "
                        "itself (default). --no-aggregate-cluster-roles leaves that, as a real kube-apiserver "
                        "does, to a controller-manager's clusterrole-aggregation-controller")
    p.add_argument("--no-service-account-admission", action="store_true",
                   help="admit pods without the ServiceAccount admission plugin (default: on, as kube-apiserver; "
                        "pods then need their ServiceAccount, made by a controller-manager's serviceaccount "
                        "controller)")
    p.add_argument("--no-storage", action="store_true",
                   help="simulate no storage: no CSI driver, default StorageClass, provisioner or attacher, and "
                        "kubelets that start pods without looking at their volumes")
    p.add_argument("--storage-provision-delay", type=_non_negative_float, default=1.0, metavar="SECONDS",
                   help="how long the simulated external-provisioner takes to create (or delete) a volume")
    p.add_argument("--storage-attach-delay", type=_non_negative_float, default=1.0, metavar="SECONDS",
                   help="how long the simulated external-attacher takes to attach (or detach) a volume")
    p.add_argument("--service-account-key-file", action="append", default=[], metavar="FILE",
                   help="PEM file of RSA or ECDSA public keys (private keys and certificates are read for theirs) "
                        "that verify legacy ServiceAccount tokens, those a controller-manager's "
                        "serviceaccount-token-controller signs (repeatable; as kube-apiserver's flag)")
    p.add_argument("--faults", default="", metavar="SPEC",
                   help="faults to inject, e.g. 'error:code=500:p=0.05,latency:seconds=0.01,slow-watch:seconds=2'")
    p.add_argument("--node-status-update-frequency", type=_positive_float, default=10.0, metavar="SECONDS")
    p.add_argument("--node-lease-renew-interval", type=_positive_float, default=10.0, metavar="SECONDS")
    p.add_argument("--webhook-service", type=_webhook_service, action="append", default=[],
                   metavar="NAME.NAMESPACE.svc:PORT=HOST:PORT",
                   help="where an admission webhook given as that Service is reached (repeatable; kube-sim runs "
                        "no pods to route to)")
    p.add_argument("--audit-log-path", default=None, metavar="FILE",
                   help="write every API request to FILE as JSON lines of audit.k8s.io/v1 Events, as kube-apiserver "
                        "does with this flag and a policy whose only rule is 'level: Metadata'")
    p.add_argument("--token-auth-file", default=None, metavar="FILE",
                   help="more bearer tokens, as kube-apiserver's flag: CSV lines token,user,uid,\"group1,group2\"")
    p.add_argument("--event-ttl", type=_event_ttl, default=3600.0, metavar="DURATION",
                   help="how long an Event is kept after its last write (default 1h; 0: kept until deleted)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = p.parse_args(argv)
    try:
        args.static_tokens = read_token_file(args.token_auth_file) if args.token_auth_file else {}
    except (OSError, ValueError) as exc:
        p.error(f"--token-auth-file: {exc}")
    try:
        args.fault_actions = parse_fault_spec(args.faults)
    except ValueError as exc:
        p.error(f"--faults: {exc}")
    try:
        load_public_keys(args.service_account_key_file)
    except (OSError, ValueError) as exc:
        p.error(f"--service-account-key-file: {exc}")
    return args


def _configure_logging(level: str) -> None:
    numeric = getattr(logging, level.upper())
    logging.basicConfig(stream=sys.stderr, level=numeric, format="%(message)s")
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"])],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


async def serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    config = KubeletConfig(node_status_update_frequency=args.node_status_update_frequency,
                           lease_renew_interval=args.node_lease_renew_interval,
                           register_pod_cidr=not args.no_kubelet_pod_cidr)
    cluster = SimCluster(nodes=args.nodes, zones=args.zones, scheduler=not args.no_scheduler,
                         kubelets=not args.no_kubelets, port=args.port, host=args.host,
                         kubeconfig_path=args.kubeconfig, kubelet_config=config, tls=True,
                         anonymous_admin=args.anonymous_admin, aggregate_cluster_roles=args.aggregate_cluster_roles,
                         storage=None if args.no_storage else StorageConfig(
                             provision_delay=args.storage_provision_delay, delete_delay=args.storage_provision_delay,
                             attach_delay=args.storage_attach_delay, detach_delay=args.storage_attach_delay),
                         audit_log_path=args.audit_log_path)
    assert cluster.api.auth is not None
    cluster.api.auth.add_static_tokens(args.static_tokens)
    cluster.api.options.webhook_service_addresses.update(dict(args.webhook_service))
    cluster.api.options.service_account_admission = not args.no_service_account_admission
    cluster.api.options.event_ttl = args.event_ttl
    if args.service_account_key_file:
        assert cluster.api.auth is not None
        cluster.api.auth.use_service_account_key_files(args.service_account_key_file)  # read by parse_args
    for action in args.fault_actions:
        action(cluster.faults)
    async with cluster:
        collector = asyncio.create_task(gctuning.collect_periodically(RealClock(), structlog.get_logger("kube-sim")),
                                        name="garbage-collection")
        # SIGUSR1: restart the watch cache (every watch cut, history kept), as an apiserver restart would.
        loop.add_signal_handler(signal.SIGUSR1, _restart_watch_cache, cluster)
        sys.stdout.write(f"kube-sim ready: {cluster.url}\n")
        sys.stdout.flush()
        await stop.wait()
        collector.cancel()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        loop.remove_signal_handler(sig)


def _restart_watch_cache(cluster: SimCluster) -> None:
    structlog.get_logger("kube-sim").info("restarting the watch cache (SIGUSR1)")
    cluster.faults.restart()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _configure_logging(args.log_level)
    # kube-sim's heap is mostly its store of objects, long-lived and free of cycles: the daemon's collector policy
    # (raised generation-0 threshold: 6.36 M -> 6.08 M instructions per pod create + status update, measured
    # with valgrind; young collections, then frozen, so no collection walks the whole store).
    gctuning.configure()
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(serve(args))
    except OSError as exc:  # e.g. the port is taken
        sys.stderr.write(f"kube-sim: error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
