"""The manager's lifecycle in-process: drain on stop, hung controllers, leader election hand-over and loss."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import ClassVar

import pytest
import structlog

from controller_manager.manager import app as app_module
from controller_manager.manager.app import Manager
from controller_manager.manager.options import Options
from controller_manager.manager.registry import Registry
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.sim.apiserver.fieldmanager import manager_name
from tests.manager.fake_apiserver import FakeApiServer
from tests.manager.test_main import write_kubeconfig


class GatedController(Controller):
    """Syncs block until ``gate`` opens; records what it synced."""

    name: ClassVar[str] = "gated-controller"
    alias: ClassVar[str] = "gated"
    workers_option: ClassVar[str | None] = "concurrent-deployment-syncs"
    instances: ClassVar[list[GatedController]] = []
    built: ClassVar[asyncio.Event]

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.synced: list[str] = []
        for key in ("default/a", "default/b"):
            self.queue.add(key)
        GatedController.instances.append(self)
        GatedController.built.set()

    async def sync(self, key: str) -> Result | None:
        self.started.set()
        await self.gate.wait()
        self.synced.append(key)
        return None


class BrokenController(Controller):
    name: ClassVar[str] = "broken-controller"
    alias: ClassVar[str] = "broken"

    def __init__(self, ctx: ControllerContext) -> None:
        raise RuntimeError("cannot build")

    async def sync(self, key: str) -> Result | None:
        return None


@pytest.fixture(autouse=True)
def _reset() -> None:
    GatedController.instances.clear()
    GatedController.built = asyncio.Event()


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    async with FakeApiServer() as api:
        yield write_kubeconfig(tmp_path / "kubeconfig", api.url)


def manager_for(kubeconfig: Path, controllers: list[str], **opts: object) -> Manager:
    registry = Registry.with_implementations([GatedController, BrokenController])
    options = Options(kubeconfig=str(kubeconfig), secure_port=0, leader_elect=False,
                      controllers=tuple(controllers), **opts)  # type: ignore[arg-type]
    return Manager(options, registry.select(options.controllers))


async def test_stop_lets_in_flight_syncs_finish(kubeconfig: Path) -> None:
    manager = manager_for(kubeconfig, ["gated"], concurrent_deployment_syncs=1)
    run = asyncio.create_task(manager.run(), name="manager")
    async with asyncio.timeout(10):
        await GatedController.built.wait()
        ctrl = GatedController.instances[0]
        await ctrl.started.wait()
    assert manager.role == "leader"
    assert "gated-controller" in manager.checks.healthz
    manager.stop()
    await _wait_for(lambda: ctrl.queue.shutting_down)  # intake is closed...
    ctrl.queue.add("default/late")  # (ignored from now on)
    assert ctrl.synced == []  # ...while the in-flight sync still runs
    assert not run.done()
    ctrl.gate.set()
    assert await asyncio.wait_for(run, 10) == 0
    # The in-flight key finished; what was already queued drained (client-go queue semantics).
    assert ctrl.synced == ["default/a", "default/b"]


async def test_hung_controller_is_named_then_cancelled(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_module, "DRAIN_TIMEOUT", 0.2)
    manager = manager_for(kubeconfig, ["gated"])
    run = asyncio.create_task(manager.run(), name="manager")
    async with asyncio.timeout(10):
        await GatedController.built.wait()
        await GatedController.instances[0].started.wait()
    with structlog.testing.capture_logs() as logs:
        manager.stop()
        assert await asyncio.wait_for(run, 10) == 0
    hung = [e for e in logs if e["event"] == "controllers did not finish in time, cancelling"]
    assert hung
    assert hung[0]["controllers"] == ["gated-controller"]


async def test_controller_that_fails_to_build_stops_startup(kubeconfig: Path) -> None:
    manager = manager_for(kubeconfig, ["broken"])
    with structlog.testing.capture_logs() as logs:
        assert await asyncio.wait_for(manager.run(), 10) == 1
    errors = [e["event"] for e in logs if e["log_level"] == "error"]
    assert errors == ["error starting controller broken-controller: RuntimeError: cannot build"]


def _elect(kubeconfig: Path) -> Manager:
    registry = Registry.with_implementations([])
    options = Options(kubeconfig=str(kubeconfig), secure_port=0, controllers=("*",),
                      leader_elect_lease_duration=2.0, leader_elect_renew_deadline=1.0,
                      leader_elect_retry_period=0.2, leader_elect_resource_name="test-lease")
    return Manager(options, registry.select(options.controllers))


async def _wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110 -- polling state owned by the code under test
            await asyncio.sleep(0.02)


async def test_standby_takes_over_when_the_leader_stops(tmp_path: Path) -> None:
    async with FakeApiServer() as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
        first, second = _elect(kubeconfig), _elect(kubeconfig)
        run1 = asyncio.create_task(first.run(), name="manager-1")
        await _wait_for(lambda: first.role == "leader")
        run2 = asyncio.create_task(second.run(), name="manager-2")
        try:
            assert first.campaign is not None
            leader = first.campaign.identity
            # The standby has read the lease and found it held by the first.
            await _wait_for(lambda: second.campaign is not None and second.campaign.elector.leader == leader)
            assert second.role == "standby"
            assert first.checks.healthz["leaderElection"]() is None
            assert api.leases[("kube-system", "test-lease")]["spec"]["holderIdentity"] == first.campaign.identity
            first.stop()
            assert await asyncio.wait_for(run1, 10) == 0
            # Released on stop: the standby takes over well before the 2 s lease duration passes.
            await _wait_for(lambda: second.role == "leader", timeout=1.5)
            assert second.campaign is not None
            assert api.leases[("kube-system", "test-lease")]["spec"]["holderIdentity"] == second.campaign.identity
        finally:
            second.stop()
            assert await asyncio.wait_for(run2, 10) == 0
        assert api.leases[("kube-system", "test-lease")]["spec"]["holderIdentity"] == ""


async def test_losing_the_lease_exits_non_zero(tmp_path: Path) -> None:
    async with FakeApiServer() as api:
        manager = _elect(write_kubeconfig(tmp_path / "kubeconfig", api.url))
        exits: list[int] = []
        manager._hard_exit = exits.append  # record instead of ending the test process
        run = asyncio.create_task(manager.run(), name="manager")
        await _wait_for(lambda: manager.role == "leader")
        with structlog.testing.capture_logs() as logs:
            api.down = True  # every request answered 503: renewals fail past the renew deadline
            assert await asyncio.wait_for(run, 10) == 1
        assert exits == [1]
        assert "leaderelection lost" in [e["event"] for e in logs]


def test_fake_kubeconfig_is_json(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "k", "http://127.0.0.1:1")
    assert json.loads(path.read_text())["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:1"


class GreedyController(GatedController):
    """Asks for a client of its own with a larger rate limit, as upstream's namespace controller has."""

    name: ClassVar[str] = "greedy-controller"
    alias: ClassVar[str] = "greedy"
    client_rate_scale: ClassVar[tuple[float, float] | None] = (20.0, 100.0)


async def test_controller_with_a_rate_scale_gets_its_own_client(kubeconfig: Path) -> None:
    registry = Registry.with_implementations([GatedController, GreedyController])
    options = Options(kubeconfig=str(kubeconfig), secure_port=0, leader_elect=False,
                      controllers=("gated", "greedy"), kube_api_qps=5.0, kube_api_burst=7)
    manager = Manager(options, registry.select(options.controllers))
    run = asyncio.create_task(manager.run(), name="manager")
    await _wait_for(lambda: len(GatedController.instances) == 2)
    by_name = {c.name: c for c in GatedController.instances}
    assert by_name["gated-controller"].ctx.client is manager.client
    greedy_client = by_name["greedy-controller"].ctx.client
    assert greedy_client is not manager.client
    assert manager.controller_clients == [greedy_client]
    limiter = greedy_client.rate_limiter
    assert (limiter.qps, limiter.burst) == (100.0, 700)
    # Shaped as kube-controller-manager's clients (rest.AddUserAgent), so the API server records the
    # daemon's writes under the field manager "kube-controller-manager".
    assert re.fullmatch(r"kube-controller-manager/v[0-9.]+ \([a-z0-9]+/[a-z0-9_]+\) kubernetes/unknown",
                        manager.client.user_agent)
    assert greedy_client.user_agent == manager.client.user_agent + "/greedy-controller"
    assert manager_name(None, greedy_client.user_agent) == "kube-controller-manager"
    for ctrl in GatedController.instances:
        ctrl.gate.set()
    manager.stop()
    assert await asyncio.wait_for(run, 10) == 0
    assert manager.controller_clients == []
