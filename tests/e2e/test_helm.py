"""The chart installed into kube-sim by the real Helm (``tools.helm``), as an operator runs it: ``helm install``,
``helm upgrade --wait`` toggling a controller, ``helm rollback --wait`` and ``helm uninstall --wait``.

The chart's pods are simulated by kube-sim's kubelets; what makes them exist is the daemon itself, started here
as its pod would run it: with the installed Deployment's container args, authenticated by a token of the
release's ServiceAccount (so only the release's ClusterRole and Role allow it anything). It then reconciles its
own Deployment, which is what ``--wait`` waits for, and leads on the Lease the values name."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.e2e.conftest import (
    Https,
    Kubectl,
    KubeSim,
    Manager,
    Processes,
    start_manager,
    wait_until,
)
from tests.e2e.test_service_account import as_service_account
from tests.packaging.chart import render
from tools.helm import run_helm
from tools.render_deploy import CHART

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

RELEASE = "cm"
NAMESPACE = "controllers"
FULLNAME = f"{RELEASE}-controller-manager"
LEASE = "helm-e2e-lock"
VALUES: dict[str, Any] = {
    "leaderElection": {"resourceName": LEASE, "leaseDuration": "3s", "renewDeadline": "2s", "retryPeriod": "0.5s"},
    "logVerbosity": 1,
    "extraArgs": {"kube-api-qps": 50},
}
WITHOUT_JOB = {**VALUES, "controllers": {"job": {"enabled": False}}}
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount")


async def helm(sim: KubeSim, *args: str, values: dict[str, Any] | None = None) -> str:
    """Run helm against kube-sim (blocking, so in a thread: the daemon keeps being served meanwhile)."""
    extra = ["--values", "-"] if values is not None else []
    done = await asyncio.to_thread(run_helm, *args, "--kubeconfig", str(sim.kubeconfig), "--namespace", NAMESPACE,
                                   *extra, stdin=json.dumps(values) if values is not None else None)
    return done.stdout


async def get(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(await kubectl.ok("get", *args, "-o", "json"))
    return result


async def pod_args(kubectl: Kubectl) -> list[str]:
    deployment = await get(kubectl, "deployment", FULLNAME, "-n", NAMESPACE)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def rendered(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What ``helm template`` makes of ``values`` for this release, by kind."""
    return {o["kind"]: o for o in render(values, namespace=NAMESPACE, release=RELEASE)}


async def assert_installed_as_rendered(kubectl: Kubectl, values: dict[str, Any]) -> None:
    """The live Deployment's args and the live RBAC objects are what the chart renders for ``values``."""
    expected = rendered(values)
    [container] = expected["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert await pod_args(kubectl) == container["args"]
    for kind in RBAC_KINDS:
        want = expected[kind]
        scope = ["-n", NAMESPACE] if kind in ("Role", "RoleBinding", "ServiceAccount") else []
        live = await get(kubectl, kind.lower(), want["metadata"]["name"], *scope)
        for key in ("rules", "roleRef", "subjects"):
            assert live.get(key) == want.get(key), f"{kind} {key}"
        assert live["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE


def controllers(args: list[str]) -> set[str]:
    [flag] = [a for a in args if a.startswith("--controllers=")]
    return set(flag.removeprefix("--controllers=").split(","))


async def start_as_pod(processes: Processes, sim: KubeSim, kubectl: Kubectl, https: Https, name: str) -> Manager:
    """The daemon with the installed pod's args, as the release's ServiceAccount."""
    token = (await kubectl.ok("create", "token", FULLNAME, "-n", NAMESPACE, "--duration=2h")).strip()
    args = [a for a in await pod_args(kubectl) if not a.startswith("--secure-port=")]
    return await start_manager(processes, as_service_account(sim, token), *args, name=name, election=(),
                               https=https)


async def history(sim: KubeSim) -> list[tuple[int, str]]:
    out = json.loads(await helm(sim, "history", RELEASE, "--output", "json"))
    return [(entry["revision"], entry["status"]) for entry in out]


async def test_install_upgrade_rollback_uninstall(
        processes: Processes, sim: KubeSim, https: Https, kubectl: Kubectl) -> None:
    await helm(sim, "install", RELEASE, str(CHART), "--create-namespace", values=VALUES)
    await assert_installed_as_rendered(kubectl, VALUES)
    args = await pod_args(kubectl)
    assert f"--leader-elect-resource-name={LEASE}" in args
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in args
    assert "--kube-api-qps=50" in args
    assert "--v=1" in args
    assert "job-controller" in controllers(args)
    role = await get(kubectl, "role", FULLNAME + "-leader-election", "-n", NAMESPACE)
    assert {name for rule in role["rules"] for name in rule.get("resourceNames", [])} == {LEASE}

    manager = await start_as_pod(processes, sim, kubectl, https, "manager")
    identity = await manager.identity()

    async def leads() -> bool:
        lease = await get(kubectl, "lease", LEASE, "-n", NAMESPACE)
        return bool(lease["spec"].get("holderIdentity") == identity)

    await wait_until(leads, what=f"the daemon to hold the Lease {NAMESPACE}/{LEASE}")
    await kubectl.ok("rollout", "status", f"deployment/{FULLNAME}", "-n", NAMESPACE, "--timeout=60s")

    # Upgrade: job-controller off. The Deployment's new template rolls out (the daemon rolls its own pods).
    await helm(sim, "upgrade", RELEASE, str(CHART), "--wait", "--timeout", "90s", values=WITHOUT_JOB)
    await assert_installed_as_rendered(kubectl, WITHOUT_JOB)
    assert controllers(await pod_args(kubectl)) == controllers(args) - {"job-controller"}
    # (assert_installed_as_rendered compared the live ClusterRole with the rendered one; it did change)
    assert rendered(WITHOUT_JOB)["ClusterRole"]["rules"] != rendered(VALUES)["ClusterRole"]["rules"]
    assert await history(sim) == [(1, "superseded"), (2, "deployed")]

    # The upgraded pod spec runs: the daemon restarted with it has no job-controller and still leads.
    await manager.process.stop()
    manager = await start_as_pod(processes, sim, kubectl, https, "manager-upgraded")
    identity = await manager.identity()
    await wait_until(leads, what="the upgraded daemon to take the Lease")
    status, verbose = await https.get(manager, "/healthz?verbose")
    assert status == 200
    assert "[+]deployment-controller ok" in verbose.splitlines()
    assert "[+]job-controller ok" not in verbose.splitlines()

    # Rollback to the first revision: job-controller and its rules are back, as revision 3.
    await helm(sim, "rollback", RELEASE, "1", "--wait", "--timeout", "90s")
    await assert_installed_as_rendered(kubectl, VALUES)
    assert await pod_args(kubectl) == args
    assert await history(sim) == [(1, "superseded"), (2, "superseded"), (3, "deployed")]

    # Uninstall: every object of the release goes, and so does the release record.
    await manager.process.stop()
    await helm(sim, "uninstall", RELEASE, "--wait", "--timeout", "60s")
    for kind, obj in rendered(VALUES).items():
        scope = ["-n", NAMESPACE] if kind not in ("ClusterRole", "ClusterRoleBinding") else []
        code, out = await kubectl("get", kind.lower(), obj["metadata"]["name"], *scope)
        assert code == 1, f"{kind} {obj['metadata']['name']} outlived the uninstall: {out}"
        assert "NotFound" in out
    assert json.loads(await helm(sim, "list", "--output", "json")) == []
