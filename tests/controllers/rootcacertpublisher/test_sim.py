"""The root CA publisher in-process against kube-sim: every namespace gets ``kube-root-ca.crt`` with the bundle
and upstream's description; it comes back when deleted and is put right when its data or description drift,
while what else is on it stays; a terminating namespace gets nothing. Driven with the API and real ``kubectl``."""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.resources import CONFIGMAPS, NAMESPACES
from controller_manager.client import NotFound
from controller_manager.controllers.rootcacertpublisher import (
    DESCRIPTION,
    DESCRIPTION_ANNOTATION,
    ROOT_CA_CERT_CONFIGMAP_NAME,
    RootCACertPublisher,
)
from tests.controllers.harness import Harness, controller_harness, wait_for
from tests.controllers.rootcacertpublisher.certs import self_signed_ca_pem

Obj = dict[str, Any]
KUBECTL = str(Path(sys.executable).parent / "kubectl")
CM = ROOT_CA_CERT_CONFIGMAP_NAME


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[str, str]:
    """(path, content) of a --root-ca-file."""
    pem = self_signed_ca_pem()
    path = tmp_path / "ca.crt"
    path.write_text(pem)
    return str(path), pem


@pytest.fixture
async def h(bundle: tuple[str, str]) -> AsyncIterator[Harness]:
    async with controller_harness(RootCACertPublisher, nodes=0, options={"root_ca_file": bundle[0]}) as harness:
        yield harness


async def get_cm(h: Harness, namespace: str) -> Obj | None:
    try:
        return await h.client.get(CONFIGMAPS, CM, namespace)
    except NotFound:
        return None


async def published(h: Harness, namespace: str, pem: str) -> Obj | None:
    """The ConfigMap once it holds exactly the bundle and the description."""
    cm = await get_cm(h, namespace)
    if cm is None or cm.get("data") != {"ca.crt": pem}:
        return None
    return cm if (cm["metadata"].get("annotations") or {}).get(DESCRIPTION_ANNOTATION) == DESCRIPTION else None


async def new_namespace(h: Harness, name: str) -> None:
    await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def barrier(h: Harness, pem: str) -> None:
    """Delete ``default``'s ConfigMap and wait until it is back: one worker syncs namespaces in the order their
    events came, so every event before this one has been acted on."""
    old = await wait_for(functools.partial(published, h, "default", pem), what="default published")
    await h.client.delete(CONFIGMAPS, CM, "default")

    async def back() -> Obj | None:
        cm = await published(h, "default", pem)
        return cm if cm is not None and cm["metadata"]["uid"] != old["metadata"]["uid"] else None

    await wait_for(back, what="default's configmap back")


async def test_every_namespace_gets_the_bundle(h: Harness, bundle: tuple[str, str]) -> None:
    _, pem = bundle
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        await wait_for(functools.partial(published, h, ns, pem), what=f"{ns} published")
    await new_namespace(h, "team-a")
    cm = await wait_for(functools.partial(published, h, "team-a", pem), what="team-a published")
    assert cm["metadata"]["annotations"] == {DESCRIPTION_ANNOTATION: DESCRIPTION}
    assert "binaryData" not in cm


async def test_deleted_config_map_comes_back(h: Harness, bundle: tuple[str, str]) -> None:
    await new_namespace(h, "team-b")
    await barrier(h, bundle[1])


async def test_drift_is_reverted_and_the_rest_is_left_alone(h: Harness, bundle: tuple[str, str]) -> None:
    _, pem = bundle
    await new_namespace(h, "team-c")
    await wait_for(functools.partial(published, h, "team-c", pem), what="team-c published")

    # A label and another annotation are someone else's business: kept, and no write follows them.
    labelled = await h.client.patch(CONFIGMAPS, CM, {"metadata": {"labels": {"owner": "me"},
                                                                   "annotations": {"note": "hi"}}}, "team-c")
    await barrier(h, pem)
    current = await get_cm(h, "team-c")
    assert current is not None
    assert current["metadata"]["resourceVersion"] == labelled["metadata"]["resourceVersion"]

    # Edited data is put back; the extra key goes (upstream compares the whole of data).
    await h.client.patch(CONFIGMAPS, CM, {"data": {"ca.crt": "tampered", "extra": "x"}}, "team-c")
    fixed = await wait_for(functools.partial(published, h, "team-c", pem), what="ca.crt reverted")
    assert fixed["metadata"]["labels"]["owner"] == "me"
    assert fixed["metadata"]["annotations"]["note"] == "hi"

    # A removed description is put back; a different one is respected.
    await h.client.patch(CONFIGMAPS, CM, {"metadata": {"annotations": {DESCRIPTION_ANNOTATION: None}}}, "team-c")
    await wait_for(functools.partial(published, h, "team-c", pem), what="description restored")
    changed = await h.client.patch(CONFIGMAPS, CM, {"metadata": {"annotations": {DESCRIPTION_ANNOTATION: "ours"}}},
                                   "team-c")
    await barrier(h, pem)
    current = await get_cm(h, "team-c")
    assert current is not None
    assert current["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]


async def test_terminating_namespace_gets_nothing(h: Harness, bundle: tuple[str, str]) -> None:
    _, pem = bundle
    await new_namespace(h, "doomed")
    await wait_for(functools.partial(published, h, "doomed", pem), what="doomed published")
    # No namespace controller runs: the namespace stays Terminating.
    await h.client.delete(NAMESPACES, "doomed")
    publisher = h.controller(RootCACertPublisher)

    async def cached_terminating() -> bool:
        ns = publisher.ns_informer.store.get("doomed")
        return ns is not None and (ns.get("status") or {}).get("phase") == "Terminating"

    await wait_for(cached_terminating, what="cache sees doomed terminating")
    await h.client.delete(CONFIGMAPS, CM, "doomed")
    await barrier(h, pem)
    assert await get_cm(h, "doomed") is None
    # The refused create was success (the namespace is terminating), not a failure retried with backoff.
    assert publisher.queue.num_requeues("doomed") == 0


async def test_without_a_root_ca_file_publishes_the_clients_ca_which_plain_http_lacks() -> None:
    # kube-sim serves plain HTTP: the client trusts no CA, so the bundle is empty (upstream's empty CAData).
    async with controller_harness(RootCACertPublisher, nodes=0) as h:
        cm = await wait_for(functools.partial(published, h, "default", ""), what="default published")
        assert cm["data"] == {"ca.crt": ""}


async def kubectl(h: Harness, home: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(h.cluster.kubeconfig_path), "--cache-dir", str(home / "cache"), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "HOME": str(home)})
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_kubectl_sees_the_bundle_in_a_new_namespace(h: Harness, bundle: tuple[str, str],
                                                         tmp_path: Path) -> None:
    _, pem = bundle
    manifest = tmp_path / "ns.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: from-kubectl\n")
    await kubectl(h, tmp_path, "create", "-f", str(manifest))
    await wait_for(functools.partial(published, h, "from-kubectl", pem), what="from-kubectl published")
    out = await kubectl(h, tmp_path, "get", "configmap", CM, "-n", "from-kubectl",
                        "-o", "jsonpath={.data.ca\\.crt}")
    assert out == pem
