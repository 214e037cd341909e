"""The daemon's life: connect, serve, win the lease, run the controllers, stop cleanly.

Order, as kube-controller-manager's ``Run``: load the client configuration -> check the API server answers
``GET /version`` (polled for 10 s, as upstream's ``WaitForAPIServer``) -> start HTTPS serving -> (with
``--leader-elect``) campaign for the Lease and wait to lead -> build the informer factory, the event
broadcaster and every enabled, implemented controller -> start the informers, wait for their caches ->
start each controller's workers (``--concurrent-*-syncs``).

Guarantees:
- Every long-lived coroutine is a named task in one ``asyncio.TaskGroup`` owned by :meth:`Manager.run`.
- Lease renewals and delegated auth reviews each go through their own ApiClient (own rate limiter), as
  upstream gives them their own clientsets: controllers saturating ``--kube-api-qps`` never delay them.
- SIGTERM/SIGINT: stop intake (every controller queue is shut down), let in-flight syncs finish for up to
  ``DRAIN_TIMEOUT`` seconds (naming the controllers that hung), stop controllers and informers, flush
  events, and only then release the Lease (nothing this process writes can follow the hand-over), stop
  serving, close the client; exit code 0. A second signal exits at once with 1.
- Losing the lease: logged ("leaderelection lost") and the process exits 1 at once, as upstream does,
  so no second leader ever overlaps with this one.
- Fencing (with ``--leader-elect``): every client the controllers and the event sender write through
  refuses to send a write once the last successful renewal is older than the renew deadline, and workers
  start no sync while a renewal is overdue (``runtime.leaderelection``): a replica woken from a pause
  longer than its lease sends nothing before it finds it has lost the Lease.
- Startup failures (bad configuration, API server unreachable, port in use, a controller failing to
  build) are one error log line and exit code 1, never a traceback.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict
from typing import Any

from controller_manager import __version__, gctuning
from controller_manager.client import ApiClient, ApiConnectionError, ApiError, ConfigError, load_config
from controller_manager.client.wire import kube_controller_manager_user_agent
from controller_manager.clock import Clock, RealClock
from controller_manager.controllers.sharder import Sharder
from controller_manager.controllerutil.sharding import ShardGate
from controller_manager.manager.auth import DelegatingAuth
from controller_manager.manager.certs import server_ssl_context
from controller_manager.manager.features import WATCH_LIST_CLIENT
from controller_manager.manager.health import HealthChecks, LoopLagProbe
from controller_manager.manager.leader import Campaign, start_campaign
from controller_manager.manager.logging import get_logger
from controller_manager.manager.options import Options
from controller_manager.manager.registry import ControllerInfo, Selection
from controller_manager.manager.serving import SecureServer
from controller_manager.manager.sharding import SHARDED_CONTROLLERS, ShardMembership
from controller_manager.runtime.controller import Controller, ControllerContext, run_controller
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.leaderelection import LeadershipLost

API_SERVER_WAIT = 10.0  # seconds, as upstream's WaitForAPIServer
API_SERVER_POLL = 1.0
DRAIN_TIMEOUT = 10.0
EVENT_COMPONENT = "controller-manager"  # source.component of the Events the manager itself writes
# Upstream's delegated authn/authz clients: "set high qps/burst limits since this will effectively limit API
# server responsiveness" (k8s.io/apiserver DelegatingAuthenticationOptions).
AUTH_CLIENT_QPS = 200.0
AUTH_CLIENT_BURST = 400


class StartupError(Exception):
    """A reason not to start; ``str()`` is the one line logged."""


def connection_reason(exc: BaseException) -> str:
    """The shortest true description of why a request failed ("Connection refused", "Unauthorized", ...)."""
    cause: BaseException | None = exc
    while cause is not None:
        for err in (getattr(cause, "os_error", None), cause):
            if isinstance(err, OSError):
                # errno first: asyncio words ECONNREFUSED as "Connect call failed (...)"
                return os.strerror(err.errno) if err.errno else str(err.strerror or err)
        cause = cause.__cause__
    if isinstance(exc, ApiError) and not isinstance(exc, ApiConnectionError):
        return f"{exc.status} {exc.reason}: {exc.message}" if exc.message else f"{exc.status} {exc.reason}"
    return str(exc) or type(exc).__name__


class Manager:
    """One run of the daemon. ``await Manager(options, selection).run()`` returns the exit code."""

    def __init__(
        self,
        options: Options,
        selection: Selection,
        *,
        clock: Clock | None = None,
        hard_exit: Callable[[int], None] | None = None,
    ) -> None:
        self.options = options
        self._hard_exit = hard_exit  # main passes os._exit: a lost lease ends the process before any cleanup
        self.selection = selection
        self.clock = clock or RealClock()
        self.log = get_logger("manager")
        self.checks = HealthChecks()
        self.probe = LoopLagProbe()
        self.client: ApiClient | None = None
        # Own clients, so own rate limiters, as upstream builds a "leader-election" clientset and the delegated
        # auth clients apart from the controllers': a burst of pod creates queued in the controllers' token
        # bucket must never delay a lease renewal past the renew deadline (the process would exit) nor a scrape.
        self.election_client: ApiClient | None = None
        self.client_config: Any = None
        self.controller_clients: list[ApiClient] = []  # own clients of controllers that ask for a larger limit
        self.auth_client: ApiClient | None = None
        self.server: SecureServer | None = None
        self.campaign: Campaign | None = None
        self.factory: SharedInformerFactory | None = None
        self.events: EventBroadcaster | None = None
        self.controllers: list[Controller] = []
        self._leading = False
        self._synced = False
        self._stop = asyncio.Event()
        self._signals = 0
        self._main: asyncio.Task[Any] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._controller_tasks: dict[str, asyncio.Task[None]] = {}
        self._event_task: asyncio.Task[Any] | None = None
        self._campaign_task: asyncio.Task[Any] | None = None
        # --sharding: this replica's shard Lease, the client and informers of its sharded controllers, their gate.
        self.shard: ShardMembership | None = None
        self.shard_client: ApiClient | None = None
        self.shard_lease_client: ApiClient | None = None  # renewals of the shard Lease, apart as the leader's are
        self.shard_factory: SharedInformerFactory | None = None
        self.gate: ShardGate | None = None
        self._shard_task: asyncio.Task[Any] | None = None
        self._shard_synced = False

    # --- entry ------------------------------------------------------------------------------------------

    async def run(self) -> int:
        self._main = asyncio.current_task()
        self._install_signal_handlers()
        try:
            return await self._run()
        except asyncio.CancelledError:
            if self._signals > 1:
                self.log.error("second signal received, exiting without cleanup")
                return 1
            raise
        finally:
            self._remove_signal_handlers()
            await self._close()

    def stop(self) -> None:
        """Ask for a graceful stop (what SIGTERM does)."""
        self._stop.set()

    @property
    def role(self) -> str:
        role = "leader" if self._leading else "standby"
        return role if self.shard is None else f"{role}, {self.shard.describe()}"

    async def _run(self) -> int:
        opts = self.options
        skipped = self.selection.not_implemented
        self.log.info("starting controller-manager", version=__version__,
                      controllers=[c.name for c in self.selection.runnable], leader_elect=opts.leader_elect)
        if skipped:
            self.log.info("not implemented by this manager, skipped", controllers=list(skipped))
        try:
            await self._connect()
            await self._start_serving()
        except StartupError as exc:
            self.log.error(str(exc))
            return 1
        code = 0
        try:
            async with asyncio.TaskGroup() as tg:
                await self._lifecycle(tg)
        except* LeadershipLost:
            self.log.error("leaderelection lost")
            code = 1
        except* StartupError as group:
            self.log.error(str(group.exceptions[0]))
            code = 1
        except* Exception as group:
            # A bug, not an operator error: log it whole (structured), exit non-zero.
            self.log.error("controller-manager failed", exc_info=group.exceptions[0])
            code = 1
        if code == 0:
            self.log.info("stopped")
        return code

    async def _lifecycle(self, tg: asyncio.TaskGroup) -> None:
        opts = self.options
        assert self.client is not None
        self._spawn(tg, self.probe.run(), "event-loop-lag-probe")
        events_client = self.client
        if opts.sharding:
            # Every replica's sharded controllers write events: fenced by the shard Lease, not the leader's.
            assert self.shard_lease_client is not None
            assert self.shard_client is not None
            self.shard = ShardMembership(self.shard_lease_client, opts, self.clock)
            self.shard_client.fence_writes(self.shard.elector.may_write)
            events_client = self.shard_client
        self.events = EventBroadcaster(events_client, self.clock, host=socket.gethostname())
        self._event_task = self._spawn(tg, self.events.run(), "event-broadcaster")
        if self.shard is not None:
            self.checks.add("shard", self.shard.health)
            self._shard_task = self._spawn(tg, self._hold_shard(self.shard), "shard-lease")
            self.log.info("acquiring the shard lease", shard=self.shard.member, ring=self.shard.ring)
            if await self._until_stopped(self.shard.wait_held()):
                self.log.info("holding the shard lease", shard=self.shard.member, ring=self.shard.ring)
                await self._start_sharded(tg)
        if opts.leader_elect:
            assert self.election_client is not None
            self.campaign = start_campaign(self.election_client, opts, self.clock,
                                           self.events.recorder(EVENT_COMPONENT))
            self.client.fence_writes(self.campaign.elector.may_write)
            self.checks.add("leaderElection", self.campaign.health)
            self._campaign_task = self._spawn(tg, self._campaign(self.campaign), "leader-election")
            self.log.info("waiting to acquire the lease", lease=f"{opts.leader_elect_resource_namespace}/"
                          f"{opts.leader_elect_resource_name}", identity=self.campaign.identity)
            if await self._until_stopped(self.campaign.wait_leading()):
                self.log.info("became leader", identity=self.campaign.identity)
        if not self._stop.is_set():
            self._leading = True
            await self._start_controllers(tg)
        await self._stop.wait()
        await self._graceful_stop()
        # In order: controllers and informers, then the event sender (cancelled, it flushes what is
        # buffered), then the campaign (cancelled, it releases the Lease), so the hand-over comes last.
        last = [t for t in (self._event_task, self._campaign_task, self._shard_task) if t is not None]
        await _cancel_all([t for t in self._tasks if t not in last])
        for task in last:
            await _cancel_all([task])

    # --- startup ----------------------------------------------------------------------------------------

    async def _connect(self) -> None:
        opts = self.options
        try:
            config = await load_config(opts.kubeconfig or None)
        except ConfigError as exc:
            raise StartupError(f"invalid configuration: {exc}") from None
        if opts.master:
            config.host = opts.master.rstrip("/")
        self.client_config = config
        agent = kube_controller_manager_user_agent
        self.client = ApiClient(config, qps=opts.kube_api_qps, burst=opts.kube_api_burst, clock=self.clock,
                                user_agent=agent())
        self.election_client = ApiClient(config, qps=opts.kube_api_qps, burst=opts.kube_api_burst, clock=self.clock,
                                         user_agent=agent("leader-election"))
        if opts.sharding:
            self.shard_client = ApiClient(config, qps=opts.kube_api_qps, burst=opts.kube_api_burst, clock=self.clock,
                                          user_agent=agent())
            self.shard_lease_client = ApiClient(config, qps=opts.kube_api_qps, burst=opts.kube_api_burst,
                                                clock=self.clock, user_agent=agent("sharding"))
        self.auth_client = ApiClient(config, qps=AUTH_CLIENT_QPS, burst=AUTH_CLIENT_BURST, clock=self.clock,
                                     user_agent=agent())
        version = await self._wait_for_api_server(config)
        self.log.info("connected to the API server", host=config.host, version=version.get("gitVersion"))

    async def _wait_for_api_server(self, config: Any) -> dict[str, Any]:
        # A client without retries: this loop is the retry, on upstream's 1 s / 10 s schedule.
        probe = ApiClient(config, qps=0, max_retries=0, request_timeout=API_SERVER_WAIT, clock=self.clock)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + API_SERVER_WAIT
        reason = "timed out"
        try:
            while True:
                try:
                    async with asyncio.timeout(max(0.1, deadline - loop.time())):
                        version = await probe.request("GET", "/version")
                    return version if isinstance(version, dict) else {}
                except TimeoutError:
                    reason = f"no answer within {API_SERVER_WAIT:.0f}s"
                except ApiConnectionError as exc:
                    reason = connection_reason(exc)
                except ApiError as exc:
                    if exc.status not in (429,) and exc.status < 500:
                        raise StartupError(f"cannot reach the API server at {config.host}: "
                                           f"{connection_reason(exc)}") from None
                    reason = connection_reason(exc)
                if loop.time() + API_SERVER_POLL >= deadline or self._stop.is_set():
                    raise StartupError(f"cannot reach the API server at {config.host}: {reason}")
                await asyncio.sleep(API_SERVER_POLL)
        finally:
            await probe.close()

    async def _start_serving(self) -> None:
        opts = self.options
        self.checks.add("ping", _ok, groups=("healthz", "livez", "readyz"))
        self.checks.add("event-loop", self.probe.check, groups=("healthz", "livez"))
        self.checks.add("informer-sync", self._informer_sync_check, groups=("readyz",))
        if opts.sharding:
            self.checks.add("shard-informer-sync", self._shard_sync_check, groups=("readyz",))
        if opts.secure_port == 0:
            self.log.info("secure serving disabled (--secure-port=0)")
            return
        assert self.auth_client is not None
        try:
            tls = server_ssl_context(opts.tls_cert_file, opts.tls_private_key_file)
        except (OSError, ValueError) as exc:
            raise StartupError(f"failed to load the serving certificate: {exc}") from None
        auth = DelegatingAuth(self.auth_client, always_allow_paths=opts.authorization_always_allow_paths,
                              clock=self.clock, logger=get_logger("authn"))
        self.server = SecureServer(host=opts.bind_address, port=opts.secure_port, ssl_context=tls, auth=auth,
                                   checks=self.checks, role=lambda: self.role, logger=get_logger("serving"))
        try:
            await self.server.start()
        except OSError as exc:
            self.server = None
            raise StartupError(f"failed to listen on {opts.bind_address}:{opts.secure_port}: "
                               f"{exc.strerror or exc}") from None
        self.log.info("serving securely", address=f"{opts.bind_address}:{self.server.port}",
                      certificate=opts.tls_cert_file or "self-signed (in memory)")

    async def _start_controllers(self, tg: asyncio.TaskGroup) -> None:
        opts = self.options
        assert self.client is not None
        # Upstream's ResyncPeriod: random in [min, 2*min), so replicas don't resync in lockstep.
        resync = opts.min_resync_period * (1.0 + random.random())
        self.factory = SharedInformerFactory(self.client, clock=self.clock, resync_period=resync,
                                             watch_list=opts.feature_enabled(WATCH_LIST_CLIENT))
        assert self.events is not None
        mapping = asdict(opts)
        for info in self.selection.runnable:
            if self.shard is not None and info.name in SHARDED_CONTROLLERS:
                continue  # running on this replica's own objects already
            self.controllers.append(self._build(info, self.events, mapping))
        if self.shard is not None:
            self.controllers.append(self._build_sharder(self.events, mapping))
        if self.shard_factory is not None:
            # The shard's informers of kinds the cluster-wide factory also caches become views of those caches
            # (once each has caught up), so the leader keeps one copy of its shard's objects, not two. Losing
            # the leader Lease ends the process, so the cluster-wide caches outlive the views.
            served = self.shard_factory.serve_from(self.factory)
            self.log.info("shard informers served from the cluster-wide caches", informers=served)
        self._spawn(tg, self.factory.run(), "informers")
        self.log.info("waiting for informer caches to sync", informers=len(self.factory.informers()))
        if not await self._until_stopped(self.factory.wait_for_cache_sync()):
            return
        self._synced = True
        gctuning.freeze_cache()  # the synced caches are long-lived: keep them out of every later collection
        self._spawn(tg, gctuning.collect_periodically(self.clock, self.log), "garbage-collection")
        self.log.info("informer caches synced")
        self._start_workers(tg, self.controllers if self.shard is None else
                            [c for c in self.controllers if c.name not in SHARDED_CONTROLLERS])

    def _start_workers(self, tg: asyncio.TaskGroup, controllers: list[Controller]) -> None:
        for ctrl in controllers:
            workers = ctrl.workers()
            if workers < 1:
                self.log.info("controller has no workers, not started", controller=ctrl.name, workers=workers)
                continue
            task = self._spawn(tg, run_controller(ctrl, workers), f"controller:{ctrl.name}")
            self._controller_tasks[ctrl.name] = task
        self.log.info("started controllers", controllers=[c.name for c in controllers])

    async def _start_sharded(self, tg: asyncio.TaskGroup) -> None:
        """This replica's sharded controllers, on informers that see only its shard's objects."""
        shard = self.shard
        assert shard is not None
        assert self.shard_client is not None
        assert self.events is not None
        resync = self.options.min_resync_period * (1.0 + random.random())
        factory = SharedInformerFactory(self.shard_client, clock=self.clock, resync_period=resync,
                                        selector_for=shard.selector)
        self.shard_factory = factory
        self.gate = ShardGate(ring=shard.ring, member=shard.member, informers=factory, client=self.shard_client,
                              clock=self.clock, log=get_logger("sharding", shard=shard.member))
        mapping = asdict(self.options)
        sharded: list[Controller] = []
        for info in self.selection.runnable:
            if info.name not in SHARDED_CONTROLLERS:
                continue
            assert info.implementation is not None
            ctx = ControllerContext(client=self.shard_client, informers=factory, clock=self.clock, events=self.events,
                                    options=mapping, logger=get_logger("controller", controller=info.name),
                                    intake=shard.elector.wait_for_intake)
            try:
                ctrl = info.implementation(ctx)
            except Exception as exc:
                raise StartupError(f"error starting controller {info.name}: {type(exc).__name__}: {exc}") from exc
            res, prefixed = SHARDED_CONTROLLERS[info.name]
            ctx.admission = self.gate.admission(ctrl, res, prefixed)
            self.checks.add(info.name, ctrl.health)
            sharded.append(ctrl)
        self.controllers.extend(sharded)
        self._spawn(tg, factory.run(), "shard-informers")
        self.log.info("waiting for the shard's informer caches to sync", informers=len(factory.informers()))
        if not await self._until_stopped(factory.wait_for_cache_sync()):
            return
        self._shard_synced = True
        self._spawn(tg, self.gate.run(), "shard-gate")
        self._start_workers(tg, sharded)

    def _build_sharder(self, events: EventBroadcaster, options: dict[str, Any]) -> Controller:
        assert self.client is not None
        assert self.factory is not None
        elector = self.campaign.elector if self.campaign is not None else None
        ctx = ControllerContext(client=self.client, informers=self.factory, clock=self.clock, events=events,
                                options={**options, "sharding_ring_name": self.shard.ring if self.shard else "",
                                         "sharding_member": self.shard.member if self.shard else ""},
                                logger=get_logger("controller", controller=Sharder.name),
                                intake=elector.wait_for_intake if elector is not None else None)
        sharder = Sharder(ctx)
        self.checks.add(Sharder.name, sharder.health)
        return sharder

    def _build(self, info: ControllerInfo, events: EventBroadcaster, options: dict[str, Any]) -> Controller:
        assert info.implementation is not None
        assert self.client is not None
        assert self.factory is not None
        client = self.client
        scale = info.implementation.client_rate_scale
        if scale is not None:
            # Upstream gives some controllers a client of their own with a larger limit (the namespace
            # controller: 20x QPS, 100x burst), so emptying a namespace never waits behind everyone's traffic.
            opts = self.options
            client = ApiClient(self.client_config, qps=opts.kube_api_qps * scale[0],
                               burst=int(opts.kube_api_burst * scale[1]), clock=self.clock,
                               user_agent=kube_controller_manager_user_agent(info.name))
            self.controller_clients.append(client)
        elector = self.campaign.elector if self.campaign is not None else None
        if elector is not None:
            client.fence_writes(elector.may_write)
        ctx = ControllerContext(client=client, informers=self.factory, clock=self.clock, events=events,
                                options=options, logger=get_logger("controller", controller=info.name),
                                intake=elector.wait_for_intake if elector is not None else None)
        try:
            ctrl = info.implementation(ctx)
        except Exception as exc:
            raise StartupError(f"error starting controller {info.name}: {type(exc).__name__}: {exc}") from exc
        self.checks.add(info.name, ctrl.health)
        return ctrl

    async def _hold_shard(self, shard: ShardMembership) -> None:
        try:
            await shard.run()
        except LeadershipLost:
            # The sharder fenced us (or we could not renew): our objects move to others; nothing this process
            # does from now on may race their new owners, so exit as on losing the leader Lease.
            if self._hard_exit is not None:
                self.log.error("shard lease lost", shard=shard.member)
                self._hard_exit(1)
            raise

    async def _campaign(self, campaign: Campaign) -> None:
        try:
            await campaign.run()
        except LeadershipLost:
            self._leading = False
            if self._hard_exit is not None:
                # Upstream exits on the spot (klog.FlushAndExit): nothing this process does after losing the
                # lease can be trusted not to race the new leader, so no drain, no event flush.
                self.log.error("leaderelection lost")
                self._hard_exit(1)
            raise

    # --- stopping ---------------------------------------------------------------------------------------

    async def _graceful_stop(self) -> None:
        self.log.info("shutting down: no new work, waiting for in-flight syncs", timeout=DRAIN_TIMEOUT)
        for ctrl in self.controllers:
            ctrl.queue.shut_down()
        pending = [t for t in self._controller_tasks.values() if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=DRAIN_TIMEOUT)
            if still:
                hung = sorted(name for name, t in self._controller_tasks.items() if t in still)
                self.log.warning("controllers did not finish in time, cancelling", controllers=hung,
                                 timeout=DRAIN_TIMEOUT)
        self._leading = False
        # The campaign task releases the Lease when cancelled; the caller cancels every task next.

    async def _close(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None
        while self.controller_clients:
            await self.controller_clients.pop().close()
        for attr in ("client", "election_client", "auth_client", "shard_client", "shard_lease_client"):
            client: ApiClient | None = getattr(self, attr)
            if client is not None:
                await client.close()
                setattr(self, attr, None)

    # --- helpers ----------------------------------------------------------------------------------------

    def _spawn(self, tg: asyncio.TaskGroup, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = tg.create_task(coro, name=name)
        self._tasks.append(task)
        return task

    async def _until_stopped(self, awaitable: Awaitable[Any]) -> bool:
        """Await ``awaitable`` unless a stop comes first: True if it completed, False if stopped first."""
        work = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait((work, stopper), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (work, stopper):
                if not fut.done():
                    fut.cancel()
            await asyncio.gather(work, stopper, return_exceptions=True)
        if work.cancelled() or not work.done():
            return False
        exc = work.exception()
        if exc is not None:
            raise exc
        return True

    def _shard_sync_check(self) -> str | None:
        return None if self._shard_synced else "shard informer caches not synced yet"

    def _informer_sync_check(self) -> str | None:
        if not self._leading or self._synced:
            return None  # a standby runs no informers: it is ready to take over
        return "informer caches not synced yet"

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
                return

    def _remove_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                return

    def _on_signal(self, sig: signal.Signals) -> None:
        self._signals += 1
        if self._signals == 1:
            self.log.info("received signal, shutting down", signal=sig.name)
            self._stop.set()
        elif self._main is not None:
            self._main.cancel()


def _ok() -> str | None:
    return None


async def _cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has finished (what a cancelled task does on its way out, such as
    flushing events or releasing the Lease, is done by then). Their errors are the task group's to report."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)

