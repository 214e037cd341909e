"""The certificate controllers against kube-sim: a kubelet-style client CSR is auto-approved (after a
SubjectAccessReview) and signed; the certificate verifies against the signing CA; kubectl shows it Issued."""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from controller_manager.api.resources import CERTIFICATESIGNINGREQUESTS
from controller_manager.controllers.certificates import CSRApprovingController, CSRSigningController
from tests.controllers.certificates.pki import csr_object, csr_pem, new_ca
from tests.controllers.harness import controller_harness, wait_for

KUBECTL = Path(sys.executable).parent / "kubectl"


async def kubectl(kubeconfig: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(str(KUBECTL), f"--kubeconfig={kubeconfig}", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_kubelet_client_csr_is_approved_and_signed(tmp_path: Path) -> None:
    cert_file, key_file, ca = new_ca(tmp_path)
    options = {"cluster_signing_cert_file": str(cert_file), "cluster_signing_key_file": str(key_file)}
    async with controller_harness(CSRSigningController, CSRApprovingController, nodes=1, options=options) as h:
        request = csr_pem("system:node:node-1")
        await h.client.create(CERTIFICATESIGNINGREQUESTS, csr_object(
            "node-csr-1", request, "kubernetes.io/kube-apiserver-client-kubelet",
            ["digital signature", "client auth"], expiration_seconds=3600))
        got: dict[str, Any] = {}

        async def issued() -> bool:
            got.update(await h.client.get(CERTIFICATESIGNINGREQUESTS, "node-csr-1"))
            return bool((got.get("status") or {}).get("certificate"))

        await wait_for(issued, timeout=30, what="the CSR to be approved and issued")
        approved = [c for c in got["status"]["conditions"] if c["type"] == "Approved"]
        assert len(approved) == 1
        assert approved[0]["reason"] == "AutoApproved"
        assert approved[0]["message"] == "Auto approving kubelet client certificate after SubjectAccessReview."
        cert = x509.load_pem_x509_certificate(base64.b64decode(got["status"]["certificate"]))
        cert.verify_directly_issued_by(ca)
        assert cert.subject == x509.load_pem_x509_csr(request).subject
        assert cert.public_key() == x509.load_pem_x509_csr(request).public_key()
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert lifetime.total_seconds() == 300 + 3600  # backdated 5 min; under 8 h: ends an hour from now
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]

        out = await kubectl(h.cluster.kubeconfig_path, "get", "csr", "node-csr-1", "--no-headers")
        assert "Approved,Issued" in out


async def test_kube_apiserver_client_csr_with_bad_usage_fails(tmp_path: Path) -> None:
    cert_file, key_file, _ = new_ca(tmp_path)
    options = {"cluster_signing_cert_file": str(cert_file), "cluster_signing_key_file": str(key_file)}
    async with controller_harness(CSRSigningController, nodes=1, options=options) as h:
        await h.client.create(CERTIFICATESIGNINGREQUESTS, csr_object(
            "client-1", csr_pem("alice", ()), "kubernetes.io/kube-apiserver-client", ["server auth"]))
        await kubectl(h.cluster.kubeconfig_path, "certificate", "approve", "client-1")
        got: dict[str, Any] = {}

        async def failed() -> bool:
            got.update(await h.client.get(CERTIFICATESIGNINGREQUESTS, "client-1"))
            return any(c["type"] == "Failed" for c in (got.get("status") or {}).get("conditions") or ())

        await wait_for(failed, timeout=30, what="the CSR to be marked Failed")
        failure = next(c for c in got["status"]["conditions"] if c["type"] == "Failed")
        assert failure["reason"] == "SignerValidationFailure"
        assert failure["message"] == "invalid usage for client certificate: server auth"
        assert "certificate" not in got["status"]
