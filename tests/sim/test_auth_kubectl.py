"""The real kubectl's auth commands against kube-sim over HTTPS with its kubeconfig's admin token:
``auth whoami``, ``auth can-i`` (with ``--as``, ``--list``), ``create token``, and a ServiceAccount token that
RBAC lets list pods but not delete them, until its RoleBinding goes."""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from controller_manager.sim.cluster import SimCluster
from tests.sim.test_cluster import kubectl as run_kubectl

KUBECTL = str(Path(sys.executable).parent / "kubectl")
SA_USER = "system:serviceaccount:default:robot"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=0, kubelets=False, scheduler=False, tls=True, anonymous_admin=False,
                          kubeconfig_path=tmp_path / "kubeconfig") as c:
        yield c


async def ok(cluster: SimCluster, tmp_path: Path, *args: str, stdin: bytes | None = None) -> str:
    code, out, err = await run_kubectl(cluster, tmp_path, *args, stdin=stdin)
    assert code == 0, f"kubectl {' '.join(args)}: {err}"
    return out


async def test_auth_whoami(cluster: SimCluster, tmp_path: Path) -> None:
    out = await ok(cluster, tmp_path, "auth", "whoami")
    assert out.split("\n")[0].split() == ["ATTRIBUTE", "VALUE"]
    assert "Username    admin" in out
    assert "[system:masters system:authenticated]" in out
    out = await ok(cluster, tmp_path, "auth", "whoami", "--context", "kube-sim-viewer", "-o", "json")
    assert orjson.loads(out)["status"]["userInfo"]["username"] == "viewer"


async def test_auth_can_i(cluster: SimCluster, tmp_path: Path) -> None:
    assert await ok(cluster, tmp_path, "auth", "can-i", "create", "pods") == "yes\n"
    code, out, _ = await run_kubectl(cluster, tmp_path, "auth", "can-i", "create", "pods", "--as=alice")
    assert (code, out) == (1, "no\n")
    code, out, _ = await run_kubectl(cluster, tmp_path, "auth", "can-i", "list", "pods", "--context",
                                     "kube-sim-viewer")
    assert (code, out) == (0, "yes\n")
    code, out, _ = await run_kubectl(cluster, tmp_path, "auth", "can-i", "delete", "nodes", "--context",
                                     "kube-sim-viewer")
    assert (code, out) == (1, "no\n")
    await ok(cluster, tmp_path, "create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice")
    assert await ok(cluster, tmp_path, "auth", "can-i", "create", "deployments.apps", "--as=alice") == "yes\n"
    code, out, _ = await run_kubectl(cluster, tmp_path, "auth", "can-i", "create", "deployments.apps", "--as=alice",
                                     "-n", "kube-system")
    assert (code, out) == (1, "no\n")
    code, out, _ = await run_kubectl(cluster, tmp_path, "auth", "can-i", "create", "roles", "--as=alice")
    assert (code, out) == (1, "no\n")  # edit, not admin


async def test_auth_can_i_list(cluster: SimCluster, tmp_path: Path) -> None:
    out = await ok(cluster, tmp_path, "auth", "can-i", "--list", "--as=alice")
    lines = out.splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    rows = [line.split() for line in lines[1:]]
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows
    assert ["[/version]", "[]", "[get]"] in rows
    assert not any(row[0] == "pods" for row in rows)
    out = await ok(cluster, tmp_path, "auth", "can-i", "--list")
    assert out.splitlines()[1].split() == ["*.*", "[]", "[]", "[*]"]


async def test_create_token_and_use_it(cluster: SimCluster, tmp_path: Path) -> None:
    await ok(cluster, tmp_path, "create", "serviceaccount", "robot")
    token = (await ok(cluster, tmp_path, "create", "token", "robot", "--duration=20m")).strip()
    payload = token.split(".")[1]
    claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == SA_USER
    assert claims["exp"] - claims["iat"] == 1200
    as_robot = ("--token", token)
    out = await ok(cluster, tmp_path, "auth", "whoami", *as_robot)
    rows = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines()[1:]}
    assert rows["Username"].strip() == SA_USER
    assert rows["Groups"].strip() == "[system:serviceaccounts system:serviceaccounts:default system:authenticated]"
    assert rows["Extra:"].split()[0] == "authentication.kubernetes.io/credential-id"

    await ok(cluster, tmp_path, "run", "web", "--image=nginx")
    code, _, err = await run_kubectl(cluster, tmp_path, "get", "pods", *as_robot)
    assert code == 1
    assert (f'Error from server (Forbidden): pods is forbidden: User "{SA_USER}" cannot list resource "pods" in API '
            'group "" in the namespace "default"') in err

    await ok(cluster, tmp_path, "create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods")
    await ok(cluster, tmp_path, "create", "rolebinding", "robot-reads", "--role=pod-reader",
             "--serviceaccount=default:robot")
    out = await ok(cluster, tmp_path, "get", "pods", "-o", "name", *as_robot)
    assert out == "pod/web\n"
    code, _, err = await run_kubectl(cluster, tmp_path, "delete", "pod", "web", *as_robot)
    assert code == 1
    assert (f'Error from server (Forbidden): pods "web" is forbidden: User "{SA_USER}" cannot delete resource '
            '"pods" in API group "" in the namespace "default"') in err
    assert await ok(cluster, tmp_path, "auth", "can-i", "watch", "pods", *as_robot) == "yes\n"

    await ok(cluster, tmp_path, "delete", "rolebinding", "robot-reads")
    code, _, err = await run_kubectl(cluster, tmp_path, "get", "pods", *as_robot)
    assert code == 1
    assert "Forbidden" in err

    await ok(cluster, tmp_path, "delete", "serviceaccount", "robot")
    code, _, err = await run_kubectl(cluster, tmp_path, "auth", "whoami", *as_robot)
    assert code == 1
    assert "Unauthorized" in err


async def test_create_token_for_the_default_service_account(cluster: SimCluster, tmp_path: Path) -> None:
    # kube-sim alone runs no serviceaccount controller: the daemon would create "default"; here the test does.
    await ok(cluster, tmp_path, "create", "serviceaccount", "default")
    token = (await ok(cluster, tmp_path, "create", "token", "default", "--audience=vault")).strip()
    payload = token.split(".")[1]
    claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["aud"] == ["vault"]
    assert claims["exp"] - claims["iat"] == 3600
    code, _, err = await run_kubectl(cluster, tmp_path, "create", "token", "default", "--duration=5m")
    assert code == 1
    assert "may not specify a duration less than 10 minutes" in err
    code, _, err = await run_kubectl(cluster, tmp_path, "create", "token", "ghost")
    assert code == 1
    assert 'serviceaccounts "ghost" not found' in err


def test_kubectl_is_there() -> None:
    assert os.access(KUBECTL, os.X_OK)
