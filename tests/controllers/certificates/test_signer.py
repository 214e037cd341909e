"""The signing controller's tables (signer_test.go TestSigner, TestHandle, TestDuration; the kubelet CSR
checks of pkg/apis/certificates/v1 helpers_test.go) and its flag rules, with a recording client."""

from __future__ import annotations

import base64
import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from controller_manager.api.resources import Resource
from controller_manager.client.errors import NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.certificates import CSRSigningController
from controller_manager.controllers.certificates.csr import (
    parse_csr,
    validate_kubelet_client_csr,
    validate_kubelet_serving_csr,
)
from controller_manager.controllers.certificates.signer import signer_files
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.certificates.pki import csr_object, csr_pem, new_ca

NOW = FakeClock().now()


@dataclass
class Recorder:
    error: Exception | None = None
    updates: list[dict[str, Any]] = field(default_factory=list)

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.updates.append(dict(obj))
        if self.error is not None:
            raise self.error
        return dict(obj)


def new_controller(tmp_path: Path, client: Recorder | None = None, **options: Any
                   ) -> tuple[CSRSigningController, Recorder, x509.Certificate]:
    cert_file, key_file, ca = new_ca(tmp_path)
    client = client or Recorder()
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock),  # type: ignore[arg-type]
                            options={"cluster_signing_cert_file": str(cert_file),
                                     "cluster_signing_key_file": str(key_file), **options})
    return CSRSigningController(ctx), client, ca


APPROVED = [{"type": "Approved", "status": "True"}]


def csr(signer: str, usages: list[str], pem: bytes | None = None, *, conditions: list[dict[str, Any]] | None = None,
        expiration_seconds: int | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = csr_object("test-csr", pem or csr_pem(), signer, usages,
                                     expiration_seconds=expiration_seconds)
    obj["status"] = {"conditions": [dict(c) for c in (APPROVED if conditions is None else conditions)]}
    return obj


SERVING = ["digital signature", "key encipherment", "server auth"]
CLIENT = ["digital signature", "key encipherment", "client auth"]


@pytest.mark.parametrize(("obj", "outcome"), [
    # kubelet-serving
    (csr("kubernetes.io/kubelet-serving", SERVING, csr_pem(dns=("node-1.example",))), "signed"),
    (csr("kubernetes.io/kubelet-serving", SERVING, csr_pem(ips=("10.0.0.1",))), "signed"),
    (csr("kubernetes.io/kubelet-serving", SERVING), "DNS or IP subjectAltName is required"),
    (csr("kubernetes.io/kubelet-serving", CLIENT, csr_pem(dns=("n",))),
     "usages did not match [digital signature key encipherment server auth]"),
    (csr("kubernetes.io/kubelet-serving", SERVING, csr_pem(orgs=("other",), dns=("n",))),
     "subject organization is not system:nodes"),
    # kube-apiserver-client-kubelet
    (csr("kubernetes.io/kube-apiserver-client-kubelet", CLIENT), "signed"),
    (csr("kubernetes.io/kube-apiserver-client-kubelet", ["digital signature", "client auth"]), "signed"),
    (csr("kubernetes.io/kube-apiserver-client-kubelet", CLIENT, csr_pem("alice")),
     "subject common name does not begin with system:node:"),
    (csr("kubernetes.io/kube-apiserver-client-kubelet", CLIENT, csr_pem(dns=("n",))),
     "DNS subjectAltNames are not allowed"),
    # kube-apiserver-client
    (csr("kubernetes.io/kube-apiserver-client", ["client auth"], csr_pem("alice", ())), "signed"),
    (csr("kubernetes.io/kube-apiserver-client", ["digital signature"], csr_pem("alice", ())),
     "missing required usage for client certificate: client auth"),
    (csr("kubernetes.io/kube-apiserver-client", ["client auth", "server auth"], csr_pem("alice", ())),
     "invalid usage for client certificate: server auth"),
    # legacy-unknown: anything
    (csr("kubernetes.io/legacy-unknown", ["server auth", "cert sign"], csr_pem("x", (), emails=("a@b.c",))),
     "signed"),
    # not for these signers, not approved, denied, failed: nothing
    (csr("example.com/other", CLIENT), None),
    (csr("kubernetes.io/kube-apiserver-client-kubelet", CLIENT, conditions=[]), None),
    (csr("kubernetes.io/kube-apiserver-client-kubelet", CLIENT,
         conditions=[*APPROVED, {"type": "Denied", "status": "True"}]), None),
    (csr("kubernetes.io/kube-apiserver-client-kubelet", CLIENT,
         conditions=[*APPROVED, {"type": "Failed", "status": "True"}]), None),
])
async def test_handle(tmp_path: Path, obj: dict[str, Any], outcome: str | None) -> None:
    controller, client, ca = new_controller(tmp_path)
    await controller.handle(copy.deepcopy(obj))
    if outcome is None:
        assert client.updates == []
        return
    assert len(client.updates) == 1
    status = client.updates[0]["status"]
    if outcome == "signed":
        cert = x509.load_pem_x509_certificate(base64.b64decode(status["certificate"]))
        cert.verify_directly_issued_by(ca)
        assert [c["type"] for c in status["conditions"]] == ["Approved"]
    else:
        assert "certificate" not in status
        failed = status["conditions"][-1]
        assert {k: failed[k] for k in ("type", "status", "reason", "message")} == {
            "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": outcome}
        assert failed["lastUpdateTime"]


async def test_signer_certificate_fields(tmp_path: Path) -> None:
    """TestSigner: subject, SANs, usages, basic constraints, lifetime, issuer of what is signed."""
    controller, client, ca = new_controller(tmp_path, cluster_signing_duration=3600.0)
    pem = csr_pem(dns=("node-1.example",), ips=("10.0.0.1",))
    await controller.handle(csr("kubernetes.io/kubelet-serving", SERVING, pem))
    cert = x509.load_pem_x509_certificate(base64.b64decode(client.updates[0]["status"]["certificate"]))
    request = x509.load_pem_x509_csr(pem)
    assert cert.subject == request.subject
    assert cert.issuer == ca.subject
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["node-1.example"]
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.1"]
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical
    assert ku.value.digital_signature
    assert ku.value.key_encipherment
    assert not ku.value.key_cert_sign
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical
    assert not bc.value.ca
    assert cert.not_valid_before_utc.timestamp() == pytest.approx(NOW - 300)
    assert cert.not_valid_after_utc.timestamp() == pytest.approx(NOW + 3600)


@pytest.mark.parametrize(("ttl", "requested", "want"), [
    (3600.0, None, 3600.0),
    (3600.0, 1800, 1800.0),
    (3600.0, 7200, 3600.0),
    (3600.0, 60, 600.0),       # under the 10-minute floor
    (3600.0, 600, 600.0),
    (8760 * 3600.0, 31_536_000 + 1, 8760 * 3600.0),
])
async def test_duration(tmp_path: Path, ttl: float, requested: int | None, want: float) -> None:
    controller, _, _ = new_controller(tmp_path, cluster_signing_duration=ttl)
    assert controller.signers["kubernetes.io/legacy-unknown"].duration(requested) == want


async def test_lifetime_is_cut_at_the_ca(tmp_path: Path) -> None:
    cert_file, key_file, ca = new_ca(tmp_path, "short-ca", days=1)
    controller, client, _ = new_controller(tmp_path, cluster_signing_cert_file=str(cert_file),
                                           cluster_signing_key_file=str(key_file))
    controller.now = lambda: ca.not_valid_before_utc.timestamp() + 60
    await controller.handle(csr("kubernetes.io/legacy-unknown", ["client auth"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(client.updates[0]["status"]["certificate"]))
    assert cert.not_valid_after_utc == ca.not_valid_after_utc


def replace_files(targets: dict[Path, Path]) -> None:
    for target, source in targets.items():
        target.write_bytes(source.read_bytes())
        os.utime(target, ns=(1, 1))


async def test_ca_files_are_read_again_when_they_change(tmp_path: Path) -> None:
    controller, client, _ = new_controller(tmp_path)
    ca_dir = tmp_path / "new"
    ca_dir.mkdir()
    new_cert, new_key, new = new_ca(ca_dir, "test-ca")
    ca = controller.signers["kubernetes.io/legacy-unknown"].ca
    replace_files({Path(ca.key_file): new_key, Path(ca.cert_file): new_cert})
    await controller.handle(csr("kubernetes.io/legacy-unknown", ["client auth"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(client.updates[0]["status"]["certificate"]))
    cert.verify_directly_issued_by(new)


async def test_update_errors(tmp_path: Path) -> None:
    controller, _, _ = new_controller(tmp_path, client=Recorder(error=NotFound(404, "NotFound", "gone")))
    await controller.handle(csr("kubernetes.io/legacy-unknown", ["client auth"]))  # gone: nothing to do
    controller, _, _ = new_controller(tmp_path, client=Recorder(error=RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="error updating signature for csr: boom"):
        await controller.handle(csr("kubernetes.io/legacy-unknown", ["client auth"]))
    with pytest.raises(RuntimeError, match=r'error auto signing csr: unrecognized usage values: \["bogus"\]'):
        await controller.handle(csr("kubernetes.io/legacy-unknown", ["bogus"]))


def test_signer_files() -> None:
    assert signer_files({}) == {}
    assert signer_files({"cluster_signing_cert_file": "c"}) == {}
    shared = signer_files({"cluster_signing_cert_file": "c", "cluster_signing_key_file": "k"})
    assert shared == dict.fromkeys(["kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client-kubelet",
                                    "kubernetes.io/kube-apiserver-client", "kubernetes.io/legacy-unknown"],
                                   ("c", "k"))
    assert signer_files({"cluster_signing_kubelet_serving_cert_file": "sc",
                         "cluster_signing_kubelet_serving_key_file": "sk"}) == {
        "kubernetes.io/kubelet-serving": ("sc", "sk")}
    with pytest.raises(ValueError, match="cannot specify default and per controller certs at the same time"):
        signer_files({"cluster_signing_cert_file": "c", "cluster_signing_key_file": "k",
                      "cluster_signing_legacy_unknown_cert_file": "x"})


def test_unreadable_ca_is_a_startup_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"failed to start kubernetes\.io/kubelet-serving certificate controller"):
        new_controller(tmp_path, cluster_signing_cert_file=str(tmp_path / "missing.crt"))


async def test_without_files_nothing_is_signed(tmp_path: Path) -> None:
    controller, client, _ = new_controller(tmp_path, cluster_signing_cert_file="", cluster_signing_key_file="")
    assert controller.signers == {}
    assert await controller.sync("test-csr") is None
    assert client.updates == []


@pytest.mark.parametrize(("cn", "orgs", "kw", "usages", "client_err", "serving_err"), [
    ("system:node:n", ("system:nodes",), {}, CLIENT, None, "usages did not match "
     "[digital signature key encipherment server auth]"),
    ("system:node:n", ("system:nodes",), {"dns": ("n",)}, SERVING, "DNS subjectAltNames are not allowed", None),
    ("system:node:n", ("system:nodes",), {"ips": ("10.0.0.1",)}, ["digital signature", "server auth"],
     "IP subjectAltNames are not allowed", None),
    ("system:node:n", ("system:nodes",), {"emails": ("a@b.c",)}, CLIENT, "Email subjectAltNames are not allowed",
     "usages did not match [digital signature key encipherment server auth]"),
    ("system:node:n", ("system:nodes",), {"dns": ("n",), "emails": ("a@b.c",)}, SERVING,
     "DNS subjectAltNames are not allowed", "Email subjectAltNames are not allowed"),
    ("system:node:n", ("system:nodes",), {"dns": ("n",), "uris": ("spiffe://x/y",)}, SERVING,
     "DNS subjectAltNames are not allowed", "URI subjectAltNames are not allowed"),
    ("system:node:n", ("system:nodes",), {"uris": ("spiffe://x/y",)}, CLIENT, "URI subjectAltNames are not allowed",
     "usages did not match [digital signature key encipherment server auth]"),
    ("n", ("system:nodes",), {"dns": ("n",)}, SERVING, "DNS subjectAltNames are not allowed",
     "subject common name does not begin with system:node:"),
    ("system:node:n", ("system:nodes", "b"), {}, CLIENT, "subject organization is not system:nodes",
     "usages did not match [digital signature key encipherment server auth]"),
    ("system:node:n", ("system:nodes",), {}, ["client auth"], "usages did not match "
     "[client auth digital signature key encipherment]", "usages did not match "
     "[digital signature key encipherment server auth]"),
])
def test_kubelet_csr_rules(cn: str, orgs: tuple[str, ...], kw: dict[str, Any], usages: list[str],
                           client_err: str | None, serving_err: str | None) -> None:
    req = parse_csr(csr_pem(cn, orgs, **kw))
    assert validate_kubelet_client_csr(req, usages) == client_err
    assert validate_kubelet_serving_csr(req, usages) == serving_err


def test_parse_csr_needs_a_request_block() -> None:
    with pytest.raises(ValueError, match="PEM block type must be CERTIFICATE REQUEST"):
        parse_csr(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    with pytest.raises(ValueError, match="PEM block type must be CERTIFICATE REQUEST"):
        parse_csr(b"garbage")
