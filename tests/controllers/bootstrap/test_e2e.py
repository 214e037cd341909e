"""The bootstrap signer and token cleaner against kube-sim, through the official ``kubernetes`` client: a
bootstrap token usable for signing signs ``kube-public/cluster-info`` (the detached JWS verifies, as ``kubeadm
join`` checks it, with an HMAC computed here independently); when the token is given an expiration the cleaner
deletes its Secret as it passes and the signer drops its signature."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import orjson

from controller_manager.api.meta import format_time
from controller_manager.api.resources import CONFIGMAPS, SECRETS
from controller_manager.client.errors import NotFound
from controller_manager.controllers.bootstrap import BootstrapSigner, TokenCleaner
from tests.controllers.harness import Harness, controller_harness, wait_for

KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: ''\n"
TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def create(h: Harness) -> None:
    """What ``kubeadm init`` writes: the cluster-info ConfigMap and a bootstrap token Secret."""
    api_client = kubernetes.config.new_client_from_config(config_file=str(h.cluster.kubeconfig_path))
    try:
        core = kubernetes.client.CoreV1Api(api_client)
        core.create_namespaced_config_map("kube-public", {"metadata": {"name": "cluster-info"},
                                                          "data": {"kubeconfig": KUBECONFIG}})
        core.create_namespaced_secret("kube-system", {
            "metadata": {"name": f"bootstrap-token-{TOKEN_ID}"}, "type": "bootstrap.kubernetes.io/token",
            "stringData": {"token-id": TOKEN_ID, "token-secret": TOKEN_SECRET,
                           "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true"}})
    finally:
        api_client.close()


def read_cluster_info(h: Harness) -> dict[str, str]:
    api_client = kubernetes.config.new_client_from_config(config_file=str(h.cluster.kubeconfig_path))
    try:
        cm = kubernetes.client.CoreV1Api(api_client).read_namespaced_config_map("cluster-info", "kube-public")
        return dict(cm.data or {})
    finally:
        api_client.close()


async def test_a_bootstrap_token_signs_cluster_info_until_it_expires() -> None:
    async with controller_harness(BootstrapSigner, TokenCleaner, nodes=0) as h:
        await asyncio.to_thread(create, h)

        async def signed() -> str:
            data = await asyncio.to_thread(read_cluster_info, h)
            return data.get(f"jws-kubeconfig-{TOKEN_ID}", "")

        jws = await wait_for(signed, timeout=30, what="cluster-info to be signed")
        header, payload, signature = jws.split(".")
        assert payload == ""  # detached: the kubeconfig is the payload
        assert orjson.loads(unb64(header)) == {"alg": "HS256", "kid": TOKEN_ID}
        expected = hmac.new(TOKEN_SECRET.encode(),
                            f"{header}.{base64.urlsafe_b64encode(KUBECONFIG.encode()).decode().rstrip('=')}".encode(),
                            hashlib.sha256).digest()
        assert hmac.compare_digest(unb64(signature), expected)
        assert (await asyncio.to_thread(read_cluster_info, h))["kubeconfig"] == KUBECONFIG

        # given an expiration, the token cleaner deletes the Secret once it passes, and the signer drops its signature
        expires_in = 2.0
        expiration = base64.b64encode(format_time(time.time() + expires_in).encode()).decode()
        await h.client.patch(SECRETS, f"bootstrap-token-{TOKEN_ID}", {"data": {"expiration": expiration}},
                             "kube-system")
        async def deleted() -> bool:
            try:
                await h.client.get(SECRETS, f"bootstrap-token-{TOKEN_ID}", "kube-system")
            except NotFound:
                return True
            return False

        await wait_for(deleted, timeout=expires_in + 20, what="the expired bootstrap token to be deleted")

        async def unsigned() -> bool:
            cm: dict[str, Any] = await h.client.get(CONFIGMAPS, "cluster-info", "kube-public")
            return not any(k.startswith("jws-kubeconfig-") for k in cm.get("data") or {})

        await wait_for(unsigned, timeout=15, what="the signature of the deleted token to be removed")


async def test_tokens_not_for_signing_or_outside_kube_system_sign_nothing() -> None:
    async with controller_harness(BootstrapSigner, nodes=0) as h:
        await h.client.create(CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "cluster-info"},
                                           "data": {"kubeconfig": KUBECONFIG}}, "kube-public")
        base = {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token"}
        await h.client.create(SECRETS, {**base, "metadata": {"name": "bootstrap-token-aaaaaa"},
                                        "stringData": {"token-id": "aaaaaa", "token-secret": TOKEN_SECRET}},
                              "kube-system")
        await h.client.create(SECRETS, {**base, "metadata": {"name": "bootstrap-token-bbbbbb"},
                                        "stringData": {"token-id": "bbbbbb", "token-secret": TOKEN_SECRET,
                                                       "usage-bootstrap-signing": "true"}}, "default")
        await h.client.create(SECRETS, {**base, "metadata": {"name": "bootstrap-token-cccccc"},
                                        "stringData": {"token-id": "cccccc", "token-secret": TOKEN_SECRET,
                                                       "usage-bootstrap-signing": "true"}}, "kube-system")

        async def signed() -> list[str]:
            cm = await h.client.get(CONFIGMAPS, "cluster-info", "kube-public")
            return sorted(k for k in cm.get("data") or {} if k.startswith("jws-kubeconfig-"))

        assert await wait_for(signed, timeout=30, what="cluster-info to be signed") == ["jws-kubeconfig-cccccc"]
