"""The daemon as it runs in a cluster: authenticated by a token of its chart's ServiceAccount and allowed only what
its chart's ClusterRole and leader-election Role grant (kube-sim's RBAC authorizer decides), its /metrics
guarded by TokenReview and SubjectAccessReview made as that account. A Deployment rolls
out; with the rule letting it create pods taken out of the role, the ReplicaSet controller is refused (403) and
records it; with the rule back, the pods come."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from tests.e2e.conftest import ROOT, Https, Kubectl, KubeSim, Processes, start_manager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

CHART = ROOT / "deploy" / "controller-manager.yaml"
EXAMPLE = ROOT / "deploy" / "examples" / "01-deployment.yaml"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
SA_USER = "system:serviceaccount:kube-system:controller-manager"


def as_service_account(sim: KubeSim, token: str) -> KubeSim:
    """``sim`` with a kubeconfig whose current user holds ``token`` instead of the admin's."""
    config = json.loads(json.dumps(sim.config))
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    for user in config["users"]:
        if user["name"] == context["context"]["user"]:
            user["user"] = {"token": token}
    path = sim.kubeconfig.with_name("service-account.kubeconfig")
    path.write_text(yaml.safe_dump(config))
    return dataclasses.replace(sim, kubeconfig=path, config=config)


async def test_the_daemon_runs_as_its_chart_service_account(
        processes: Processes, sim: KubeSim, https: Https, kubectl: Kubectl) -> None:
    rbac = [d for d in yaml.safe_load_all(CHART.read_text()) if d and d["kind"] in RBAC_KINDS]
    rbac_file = processes.directory / "rbac.yaml"
    rbac_file.write_text(yaml.safe_dump_all(rbac))
    await kubectl.ok("apply", "-f", str(rbac_file))
    token = (await kubectl.ok("create", "token", "controller-manager", "-n", "kube-system",
                              "--duration=2h")).strip()
    manager = await start_manager(processes, as_service_account(sim, token), https=https)
    await https.wait_role(manager, "leader")
    # Its delegated authentication and authorization (TokenReview, SubjectAccessReview) run as the account too.
    assert (await https.get(manager, "/metrics", token=sim.token("admin")))[0] == 200
    assert (await https.get(manager, "/metrics", token=sim.token("viewer")))[0] == 403

    await kubectl.ok("apply", "-f", str(EXAMPLE))
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out

    # Take "create pods" out of the role: RBAC now refuses the ReplicaSet controller's creates.
    role = json.loads(await kubectl.ok("get", "clusterrole", "controller-manager", "-o", "json"))
    original = json.loads(json.dumps(role["rules"]))
    for rule in role["rules"]:
        if rule.get("apiGroups") == [""] and rule.get("resources") == ["pods"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    await kubectl.ok("patch", "clusterrole", "controller-manager", "--type=merge",
                     "-p", json.dumps({"rules": role["rules"]}))
    code, out = await kubectl("auth", "can-i", "create", "pods", f"--as={SA_USER}")
    assert (code, out.strip()) == (1, "no")
    await kubectl.ok("scale", "deployment/web", "--replicas=8")

    async def refused() -> str | None:
        out = await kubectl.ok("get", "events", "--field-selector=reason=FailedCreate", "-o", "json")
        messages = [e["message"] for e in json.loads(out)["items"]]
        return next((m for m in messages if "forbidden" in m), None)

    message = await wait_until(refused, timeout=30, what="a FailedCreate event")
    assert (f'is forbidden: User "{SA_USER}" cannot create resource "pods" in API group "" in the namespace '
            '"default"') in message
    out = await kubectl.ok("get", "deployment", "web", "-o", "jsonpath={.status.replicas}")
    assert out == "6"

    await kubectl.ok("patch", "clusterrole", "controller-manager", "--type=merge",
                     "-p", json.dumps({"rules": original}))
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=90s")
    assert 'deployment "web" successfully rolled out' in out
    assert await kubectl.ok("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}") == "8"
