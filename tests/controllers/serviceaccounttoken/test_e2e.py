"""The token controllers against kube-sim, through the official ``kubernetes`` client and kubectl: a token Secret
annotated for a ServiceAccount is filled; its token authenticates (SelfSubjectReview, ``kubectl auth whoami``, a
TokenReview) as kube-apiserver with ``--service-account-key-file`` does, and marks the Secret used; deleting the
Secret revokes it (401); deleting the ServiceAccount deletes its token Secrets; the legacy cleaner invalidates an
unused auto-generated token."""

from __future__ import annotations

import asyncio
import base64
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controller_manager.api.resources import CONFIGMAPS, SECRETS, SERVICEACCOUNTS, TOKENREVIEWS
from controller_manager.client.errors import NotFound
from controller_manager.controllers.serviceaccounttoken import LegacySATokenCleaner, TokensController
from tests.controllers.certificates.pki import new_ca
from tests.controllers.harness import Harness, controller_harness, wait_for

KUBECTL = Path(sys.executable).parent / "kubectl"
NS = "default"


def key_pair(directory: Path) -> tuple[Path, Path]:
    """An RSA service-account key: (private key file for the controller, public key file for kube-sim)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def official(h: Harness, token: str | None = None) -> Any:
    """An official-client ApiClient for the cluster: the kubeconfig's admin, or bearer ``token``."""
    api_client = kubernetes.config.new_client_from_config(config_file=str(h.cluster.kubeconfig_path))
    if token is not None:
        api_client.configuration.api_key = {"authorization": f"Bearer {token}"}
        api_client.configuration.api_key_prefix = {}
        api_client.set_default_header("Authorization", f"Bearer {token}")
    return api_client


def whoami(h: Harness, token: str) -> tuple[int, str]:
    """(HTTP status, username) of a SelfSubjectReview made with ``token``."""
    api_client = official(h, token)
    try:
        review = kubernetes.client.AuthenticationV1Api(api_client).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        return 201, review.status.user_info.username
    except kubernetes.client.ApiException as exc:
        return exc.status, ""
    finally:
        api_client.close()


async def kubectl(h: Harness, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(str(KUBECTL), f"--kubeconfig={h.cluster.kubeconfig_path}", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode(), err.decode()


def create_account_and_token_secret(h: Harness, sa: str, secret: str) -> None:
    api_client = official(h)
    try:
        core = kubernetes.client.CoreV1Api(api_client)
        core.create_namespaced_service_account(NS, {"metadata": {"name": sa}})
        core.create_namespaced_secret(NS, {
            "metadata": {"name": secret, "annotations": {"kubernetes.io/service-account.name": sa}},
            "type": "kubernetes.io/service-account-token"})
    finally:
        api_client.close()


async def filled(h: Harness, name: str) -> dict[str, Any]:
    got: dict[str, Any] = {}

    async def check() -> bool:
        got.update(await h.client.get(SECRETS, name, NS))
        return {"token", "ca.crt", "namespace"} <= set(got.get("data") or {})

    await wait_for(check, timeout=30, what=f"secret {name} to be filled")
    return got


async def test_token_secret_is_filled_authenticates_and_is_revoked_with_its_secret(tmp_path: Path) -> None:
    private, public = key_pair(tmp_path)
    options = {"service_account_private_key_file": str(private)}
    async with controller_harness(TokensController, nodes=0, options=options, start=False, tls=True) as h:
        assert h.cluster.api.auth is not None
        h.cluster.api.auth.use_service_account_key_files([str(public)])
        await h.start()
        await asyncio.to_thread(create_account_and_token_secret, h, "robot", "robot-token")
        secret = await filled(h, "robot-token")
        sa = await h.client.get(SERVICEACCOUNTS, "robot", NS)
        data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
        # no --root-ca-file: the CA the controller-manager's client trusts, here kube-sim's
        assert data["ca.crt"] == h.cluster.ca_pem
        assert data["namespace"] == b"default"
        assert secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == sa["metadata"]["uid"]
        token = data["token"].decode()
        header, claims, _ = token.split(".")
        pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
        assert orjson.loads(base64.urlsafe_b64decode(pad(header)))["alg"] == "RS256"
        assert orjson.loads(base64.urlsafe_b64decode(pad(claims))) == {
            "iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:default:robot",
            "kubernetes.io/serviceaccount/namespace": "default",
            "kubernetes.io/serviceaccount/secret.name": "robot-token",
            "kubernetes.io/serviceaccount/service-account.name": "robot",
            "kubernetes.io/serviceaccount/service-account.uid": sa["metadata"]["uid"]}

        # the token authenticates, as kube-apiserver with --service-account-key-file would accept it
        assert await asyncio.to_thread(whoami, h, token) == (201, "system:serviceaccount:default:robot")
        code, out, err = await kubectl(h, f"--token={token}", "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
        assert code == 0, err
        user = orjson.loads(out)
        assert user["username"] == "system:serviceaccount:default:robot"
        assert user["uid"] == sa["metadata"]["uid"]
        assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
        # ... and its use is recorded on the Secret, a day at a time
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        used = await h.client.get(SECRETS, "robot-token", NS)
        assert used["metadata"]["labels"]["kubernetes.io/legacy-token-last-used"] == today
        review = await h.client.create(TOKENREVIEWS, token_review(token))
        assert review["status"]["authenticated"] is True
        assert review["status"]["user"]["username"] == "system:serviceaccount:default:robot"

        # a token nobody signed with the key is refused outright
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert (await asyncio.to_thread(whoami, h, forged))[0] == 401

        # deleting the Secret revokes the token
        await h.client.delete(SECRETS, "robot-token", NS)
        assert (await asyncio.to_thread(whoami, h, token))[0] == 401
        review = await h.client.create(TOKENREVIEWS, token_review(token))
        assert review["status"].get("authenticated") is not True
        assert "Token has been invalidated" in review["status"]["error"]


def token_review(token: str) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


async def test_deleting_the_service_account_deletes_its_tokens_and_revokes_them(tmp_path: Path) -> None:
    private, public = key_pair(tmp_path)
    ca_file, _, _ = new_ca(tmp_path)
    options = {"service_account_private_key_file": str(private), "root_ca_file": str(ca_file)}
    async with controller_harness(TokensController, nodes=0, options=options, start=False) as h:
        assert h.cluster.api.auth is not None
        h.cluster.api.auth.use_service_account_key_files([str(public)])
        await h.start()
        await asyncio.to_thread(create_account_and_token_secret, h, "builder", "builder-token")
        secret = await filled(h, "builder-token")
        assert base64.b64decode(secret["data"]["ca.crt"]) == ca_file.read_bytes()  # --root-ca-file
        token = base64.b64decode(secret["data"]["token"]).decode()
        assert (await asyncio.to_thread(whoami, h, token))[0] == 201
        await h.client.delete(SERVICEACCOUNTS, "builder", NS)

        async def gone() -> bool:
            try:
                await h.client.get(SECRETS, "builder-token", NS)
            except NotFound:
                return True
            return False

        await wait_for(gone, timeout=30, what="the token Secret of the deleted ServiceAccount to be deleted")
        assert (await asyncio.to_thread(whoami, h, token))[0] == 401
        # a token Secret naming an account that does not exist is deleted as well
        await h.client.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "orphan-token", "annotations": {"kubernetes.io/service-account.name": "nobody"}},
            "type": "kubernetes.io/service-account-token"}, NS)

        async def orphan_gone() -> bool:
            try:
                await h.client.get(SECRETS, "orphan-token", NS)
            except NotFound:
                return True
            return False

        await wait_for(orphan_gone, timeout=30, what="the orphan token Secret to be deleted")


async def test_an_unused_auto_generated_token_is_invalidated_then_refused(tmp_path: Path) -> None:
    private, public = key_pair(tmp_path)
    # a period of one second: the tracking ConfigMap kube-sim wrote today becomes old enough tomorrow, so it
    # is backdated here as a cluster that has tracked for a long time would have it
    options = {"service_account_private_key_file": str(private),
               "legacy_service_account_token_clean_up_period": 1.0}
    async with controller_harness(TokensController, nodes=0, options=options, start=False, tls=True) as h:
        api = h.cluster.api
        assert api.auth is not None
        api.auth.use_service_account_key_files([str(public)])
        api.patch(CONFIGMAPS, "kube-system", "kube-apiserver-legacy-service-account-token-tracking",
                  {"data": {"since": "2020-01-01"}}, "merge")
        await h.start()
        await asyncio.to_thread(create_account_and_token_secret, h, "old", "old-token")
        secret = await filled(h, "old-token")
        token = base64.b64decode(secret["data"]["token"]).decode()
        # the account lists it: an auto-generated token, as the pre-1.24 controller made them
        sa = await h.client.get(SERVICEACCOUNTS, "old", NS)
        await h.client.update(SERVICEACCOUNTS, {**sa, "secrets": [{"name": "old-token"}]})
        await asyncio.sleep(1.1)  # older than the one-second period: the cleaner's cut-off is wall-clock time
        # the cleaner's first pass runs as it starts (then once a day)
        cleaner = Harness(h.cluster, h.client, [LegacySATokenCleaner], options, None, h.clock)
        await cleaner.start()

        async def invalidated() -> str:
            got = await h.client.get(SECRETS, "old-token", NS)
            return str((got["metadata"].get("labels") or {}).get("kubernetes.io/legacy-token-invalid-since") or "")

        assert await wait_for(invalidated, timeout=30, what="the token to be labelled invalid") == \
            datetime.now(UTC).strftime("%Y-%m-%d")
        code, _, err = await kubectl(h, f"--token={token}", "auth", "whoami")
        assert code != 0
        assert "Unauthorized" in err
        await cleaner.stop()
