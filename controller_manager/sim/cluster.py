"""SimCluster: the API server emulator served over HTTP, with a scheduler and kubelets, as one unit.

Guarantees:
- ``async with SimCluster(...) as cluster`` returns once the API answers on ``cluster.url``
  (127.0.0.1, ``port`` or a free one), every initial node is registered (Ready) and the kubeconfig
  at ``cluster.kubeconfig_path`` is written (admin context current, a "viewer" context beside it).
- Leaving the block stops everything it started: HTTP watches are ended first (so the server can
  close at once), then the scheduler and kubelet tasks are cancelled and awaited, then the server.
- ``cluster.api`` is the in-process ApiServer (same semantics as HTTP), ``cluster.faults`` the
  FaultInjector wired into the HTTP app, ``cluster.kubelets`` the KubeletManager (None without
  kubelets), ``cluster.scheduler`` the Scheduler (None without one).
- Nodes are named ``node-1`` ... ``node-N`` and spread round-robin over zones ``zone-a``,
  ``zone-b``, ...
- With ``tls=True`` (the ``kube-sim`` command) it serves HTTPS with a CA and certificate made at
  start-up (:mod:`tls`); ``cluster.url`` is ``https://...``, the kubeconfig carries the CA, and
  ``cluster.ca_pem`` is it. client-go (so kubectl) sends a bearer token only over HTTPS
  (kubernetes/kubectl#744), which is why: over plain HTTP kubectl would be anonymous.
- A request without credentials is ``system:anonymous`` (403 for every resource, as RBAC answers it)
  unless ``anonymous_admin`` (the default for in-process use; ``kube-sim --anonymous-admin``), which
  serves it as the admin, like the old apiserver's insecure port. Requests that carry a token are
  authenticated as that token's user either way, so the viewer token still only reads and an unknown
  token is 401.
- ``aggregate_cluster_roles=False`` (``kube-sim --no-aggregate-cluster-roles``) leaves ClusterRoles with an
  aggregationRule as written, bootstrap ``admin``/``edit``/``view`` empty, for a controller-manager's
  clusterrole-aggregation-controller to fill, as in a real cluster.
- With ``storage`` (a :class:`~controller_manager.sim.storage.StorageConfig`) the cluster has a simulated CSI
  driver: its CSIDriver and default StorageClass exist once the block is entered, its provisioner and attacher
  run (``cluster.storage``), and the kubelets publish CSINodes, wait for pods' volumes and report
  ``volumesInUse``. Without it (the in-process default) pods' volumes are not looked at.
- ``audit_log_path`` (``kube-sim --audit-log-path``) writes every HTTP request to that file as an audit
  Event at level Metadata (:mod:`apiserver.audit`); ``cluster.audit`` is the log, flushed when the cluster stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import shutil
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog
from aiohttp import web

from controller_manager.api.meta import meta
from controller_manager.api.resources import NODES
from controller_manager.clock import Clock, RealClock
from controller_manager.sim import tls as tls_certs
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, build_app
from controller_manager.sim.apiserver.audit import AuditLog
from controller_manager.sim.apiserver.component_status import Health, Probe
from controller_manager.sim.apiserver.http import STREAMING_KEY
from controller_manager.sim.faults import FaultInjector
from controller_manager.sim.kubeconfig import write_kubeconfig
from controller_manager.sim.kubelet import KUBELET_ANNOTATION, KubeletConfig, KubeletManager
from controller_manager.sim.resizer import SimResizer
from controller_manager.sim.scheduler import Scheduler
from controller_manager.sim.storage import StorageConfig, StorageSim

__all__ = ["SimCluster", "zone_names"]

log = structlog.get_logger("kube-sim")


def zone_names(count: int) -> list[str]:
    """``zone-a``, ``zone-b``, ... (then ``zone-aa``-style names past 26)."""
    letters = string.ascii_lowercase
    out = []
    for i in range(max(1, count)):
        name = ""
        n = i
        while True:
            name = letters[n % 26] + name
            n = n // 26 - 1
            if n < 0:
                break
        out.append(f"zone-{name}")
    return out


def _task_probe(task: asyncio.Task[None]) -> Probe:
    """componentstatuses' check of an in-process component: its /healthz says ``ok`` while its task runs."""

    async def probe() -> Health:
        if not task.done():
            return Health("True", "ok")
        return Health("False", "the in-process component has stopped")

    return probe


class SimCluster:
    """A simulated cluster: API server (HTTP + in-process), scheduler, kubelets, fault injection."""

    def __init__(
        self,
        nodes: int = 3,
        zones: int = 1,
        scheduler: bool = True,
        kubelets: bool = True,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        kubeconfig_path: str | Path | None = None,
        clock: Clock | None = None,
        kubelet_config: KubeletConfig | None = None,
        api_options: ApiServerOptions | None = None,
        scheduler_retry_interval: float = 15.0,
        ready_timeout: float = 30.0,
        tls: bool = False,
        anonymous_admin: bool = True,
        aggregate_cluster_roles: bool = True,
        storage: StorageConfig | None = None,
        resize_delay: float = 0.0,
        audit_log_path: str | Path | None = None,
    ) -> None:
        if nodes < 0:
            raise ValueError("nodes must be >= 0")
        self.clock: Clock = clock or RealClock()
        options = api_options or ApiServerOptions(admin_token=_token(), viewer_token=_token())
        if not aggregate_cluster_roles:
            options = dataclasses.replace(options, aggregate_cluster_roles=False)
        self.api = ApiServer(self.clock, options)
        self.faults = FaultInjector(self.api, self.clock)
        self.scheduler = Scheduler(self.api, self.clock, retry_interval=scheduler_retry_interval) if scheduler else None
        self.kubelets = KubeletManager(self.api, self.clock, kubelet_config, storage) if kubelets else None
        self.storage = StorageSim(self.api, self.clock, storage) if storage is not None else None
        # The CSI drivers' external-resizer sidecar (every driver; no node-side expansion).
        self.resizer = SimResizer(self.api, self.clock, delay=resize_delay)
        self._zones = zone_names(zones)
        self._initial_nodes = nodes
        self._host = host
        self._port = port
        self._kubeconfig_arg = Path(kubeconfig_path) if kubeconfig_path is not None else None
        self._tmpdir: str | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._ready_timeout = ready_timeout
        self._anonymous_admin = anonymous_admin
        self.serving_cert = tls_certs.generate(host) if tls else None
        self.url = ""
        self.kubeconfig_path: Path = Path()
        self._audit_log_path = audit_log_path
        self.audit: AuditLog | None = None

    # ---- lifecycle

    async def __aenter__(self) -> SimCluster:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        middlewares: list[Any] = []
        if self._audit_log_path is not None:
            # Outermost, as the apiserver's audit filter wraps the rest: refused and fault-injected requests
            # are audited too.
            auth = self.api.auth
            assert auth is not None
            self.audit = AuditLog(self._audit_log_path, auth.authenticate)
            self.audit.start()
            middlewares.append(self.audit.middleware)
        if self._anonymous_admin:
            middlewares.append(self._insecure_port_admin)
        app = build_app(self.api, middlewares=[*middlewares, self.faults.middleware])
        if self.kubelets is not None:  # an attached main process that ends ends its container
            app[STREAMING_KEY].runtime.on_main_exit = self.kubelets.main_process_exited
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        cert = self.serving_cert
        site = web.TCPSite(self._runner, self._host, self._port,
                           ssl_context=cert.server_context() if cert is not None else None)
        await site.start()
        server = site._server  # the bound socket tells which port --port 0 got
        sockets = getattr(server, "sockets", None) or ()
        port = sockets[0].getsockname()[1] if sockets else self._port
        self.url = f"{'https' if cert is not None else 'http'}://{self._host}:{port}"
        if self.storage is not None:
            self.storage.install()
            self._tasks.append(asyncio.create_task(self.storage.run(), name="sim-storage"))
        if self.kubelets is not None:
            for i in range(self._initial_nodes):
                self.kubelets.add_node(f"node-{i + 1}", self._zones[i % len(self._zones)])
            self._tasks.append(asyncio.create_task(self.kubelets.run(), name="sim-kubelets"))
        if self.scheduler is not None:
            scheduler_task = asyncio.create_task(self.scheduler.run(), name="sim-scheduler")
            self._tasks.append(scheduler_task)
            self.api.component_probes["scheduler"] = _task_probe(scheduler_task)
        self._tasks.append(asyncio.create_task(self.resizer.run(), name="sim-resizer"))
        if self.kubelets is not None:
            await self._wait(self._all_ready(self.kubelets.node_names), "nodes to register")
        self.kubeconfig_path = self._kubeconfig_arg or Path(self._make_tmpdir()) / "kubeconfig"
        await asyncio.to_thread(write_kubeconfig, self.kubeconfig_path, self.url,
                                self.api.options.admin_token or "", self.api.options.viewer_token or "",
                                ca_pem=cert.ca_pem if cert is not None else None)
        log.info("kube-sim ready", url=self.url, nodes=self._initial_nodes, kubeconfig=str(self.kubeconfig_path))

    async def stop(self) -> None:
        self.faults.clear()
        self.api.close_all_watches()  # streaming handlers end, so the server can shut down at once
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._runner is not None:
            self.api.close_all_watches()
            await self._runner.cleanup()
            self._runner = None
        if self.audit is not None:
            await self.audit.close()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    @web.middleware
    async def _insecure_port_admin(self, request: web.Request, handler: Any) -> web.StreamResponse:
        token = self.api.options.admin_token
        if token and "Authorization" not in request.headers:
            request = request.clone(headers={**request.headers, "Authorization": f"Bearer {token}"})
        response: web.StreamResponse = await handler(request)
        return response

    def _make_tmpdir(self) -> str:
        self._tmpdir = tempfile.mkdtemp(prefix="kube-sim-")
        return self._tmpdir

    async def _wait(self, predicate: Any, what: str) -> None:
        deadline = asyncio.get_running_loop().time() + self._ready_timeout
        while not predicate():
            for task in self._tasks:
                if task.done():
                    task.result()  # an actor died: say why, now
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"kube-sim: timed out waiting for {what}")
            await asyncio.sleep(0.005)

    def _all_ready(self, names: list[str]) -> Callable[[], bool]:
        """A predicate true once every node named is Ready; each call resumes at the first one not seen Ready
        (checking all 5,000 nodes every poll made start-up quadratic)."""
        seen = 0

        def ready() -> bool:
            nonlocal seen
            while seen < len(names) and self._node_ready(names[seen]):
                seen += 1
            return seen == len(names)
        return ready

    def _node_ready(self, name: str) -> bool:
        node = self.api.stored_object(NODES, None, name)  # read only: no private copy
        if node is None:
            return False
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or ())

    # ---- conveniences

    @property
    def ca_pem(self) -> bytes | None:
        """The CA clients must trust (None when serving plain HTTP)."""
        return self.serving_cert.ca_pem if self.serving_cert is not None else None

    @property
    def admin_token(self) -> str:
        return self.api.options.admin_token or ""

    @property
    def viewer_token(self) -> str:
        return self.api.options.viewer_token or ""

    async def add_node(self, name: str, zone: str | None = None) -> None:
        """Add a node with a kubelet; returns once it is registered and Ready."""
        if self.kubelets is None:
            raise RuntimeError("this SimCluster runs no kubelets")
        self.kubelets.add_node(name, zone or self._zones[len(self.kubelets.node_names) % len(self._zones)])
        await self._wait(lambda: self._node_ready(name), f"node {name} to register")

    async def stop_kubelet(self, node: str) -> None:
        """Kill the node's kubelet (heartbeats, lease renewals and pod progress stop), as
        ``kubectl annotate node <node> sim.controller-manager.io/kubelet=stopped`` does."""
        await self._set_kubelet(node, "stopped")

    async def start_kubelet(self, node: str) -> None:
        """Bring a stopped kubelet back (it re-posts Ready and picks its pods up again)."""
        await self._set_kubelet(node, "running")

    async def _set_kubelet(self, node: str, state: str) -> None:
        self.api.patch(NODES, None, node, {"metadata": {"annotations": {KUBELET_ANNOTATION: state}}}, "merge")
        if self.kubelets is not None:
            kubelets = self.kubelets
            await self._wait(lambda: kubelets.is_stopped(node) == (state == "stopped"), f"kubelet {node} {state}")
            if state == "running":
                await self._wait(lambda: self._node_ready(node), f"node {node} Ready")

    def node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.api.get(NODES, None, name)
        return node

    def node_uid(self, name: str) -> str:
        return str(meta(self.node(name)).get("uid", ""))


def _token() -> str:
    return secrets.token_hex(16)
