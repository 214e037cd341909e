"""The token controllers as they run, against ``kube-sim --service-account-key-file``, through real kubectl:
``controller-manager --service-account-private-key-file`` fills a token Secret, kubectl authenticates with the
token (``auth whoami``) until the Secret is deleted; with the bootstrap controllers turned on, a bootstrap
token signs ``kube-public/cluster-info``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.e2e.conftest import Kubectl, Processes, start_kube_sim, start_manager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

TOKEN_SECRET_YAML = """apiVersion: v1
kind: Secret
metadata:
  name: robot-token
  annotations:
    kubernetes.io/service-account.name: robot
type: kubernetes.io/service-account-token
"""
BOOTSTRAP_TOKEN_YAML = """apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-abcdef
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: abcdef
  token-secret: 0123456789abcdef
  usage-bootstrap-signing: "true"
"""


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_legacy_tokens_and_bootstrap_signing_end_to_end(processes: Processes, tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())  # ES256, as a kubeadm cluster's sa.key may be RSA or EC
    private, public = processes.directory / "sa.key", processes.directory / "sa.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    sim = await start_kube_sim(processes, nodes=0, extra=["--service-account-key-file", str(public)])
    home = tmp_path / "home"
    home.mkdir()
    kubectl = Kubectl(sim, home)
    await start_manager(processes, sim, "--controllers=serviceaccount-token,bootstrapsigner,tokencleaner",
                        f"--service-account-private-key-file={private}")

    await kubectl.ok("create", "serviceaccount", "robot")
    (tmp_path / "secret.yaml").write_text(TOKEN_SECRET_YAML)
    await kubectl.ok("apply", "-f", str(tmp_path / "secret.yaml"))

    async def token() -> str:
        return base64.b64decode(await kubectl.ok("get", "secret", "robot-token", "-o", "jsonpath={.data.token}"))\
            .decode()

    legacy = await wait_until(token, timeout=60, what="the token Secret to be filled")
    assert json.loads(unb64(legacy.split(".")[0]))["alg"] == "ES256"
    who = await kubectl.ok(f"--token={legacy}", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert who == "system:serviceaccount:default:robot"
    await kubectl.ok("delete", "secret", "robot-token")
    code, out = await kubectl(f"--token={legacy}", "auth", "whoami")
    assert code != 0
    assert "Unauthorized" in out

    kubeconfig = "apiVersion: v1\nkind: Config\n"
    await kubectl.ok("create", "configmap", "cluster-info", "-n", "kube-public",
                     f"--from-literal=kubeconfig={kubeconfig}")
    (tmp_path / "bootstrap.yaml").write_text(BOOTSTRAP_TOKEN_YAML)
    await kubectl.ok("apply", "-f", str(tmp_path / "bootstrap.yaml"))

    async def signature() -> str:
        return await kubectl.ok("get", "configmap", "cluster-info", "-n", "kube-public", "-o",
                                "jsonpath={.data.jws-kubeconfig-abcdef}")

    jws = await wait_until(signature, timeout=60, what="cluster-info to be signed")
    header, payload, sig = jws.split(".")
    assert payload == ""
    signing_input = f"{header}.{base64.urlsafe_b64encode(kubeconfig.encode()).decode().rstrip('=')}"
    assert hmac.compare_digest(unb64(sig), hmac.new(b"0123456789abcdef", signing_input.encode(),
                                                     hashlib.sha256).digest())
