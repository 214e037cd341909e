"""Test keys, CAs and certificate requests (made with the ``cryptography`` package)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def new_ca(directory: Path, cn: str = "test-ca", days: float = 3650.0) -> tuple[Path, Path, x509.Certificate]:
    """A self-signed ECDSA CA written to ``directory``: (cert file, key file, certificate)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / f"{cn}.crt", directory / f"{cn}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, cert


def csr_pem(cn: str = "system:node:node-1", orgs: tuple[str, ...] = ("system:nodes",), *,
            dns: tuple[str, ...] = (), ips: tuple[str, ...] = (), emails: tuple[str, ...] = (),
            uris: tuple[str, ...] = ()) -> bytes:
    """A PEM certificate request with that subject and those subjectAltNames."""
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    if cn:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    sans += [x509.RFC822Name(e) for e in emails]
    sans += [x509.UniformResourceIdentifier(u) for u in uris]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def csr_object(name: str, request: bytes, signer: str, usages: list[str], *, username: str = "",
               expiration_seconds: int | None = None) -> dict[str, object]:
    spec: dict[str, object] = {"request": base64.b64encode(request).decode(), "signerName": signer,
                               "usages": usages}
    if username:
        spec["username"] = username
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": spec}
