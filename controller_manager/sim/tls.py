"""kube-sim's serving certificate: a CA and a certificate it signs, made in memory at start-up.

Why: client-go (so kubectl) sends a bearer token only over HTTPS, so kube-sim serves HTTPS and its
kubeconfig carries the CA (``certificate-authority-data``) beside the token, as a real cluster's does.

Guarantees:
- :func:`generate` makes, as kube-apiserver does when it is given no certificate
  (``GenerateSelfSignedCertKeyWithFixtures``), a CA ``<host>-ca@<unix time>`` and a serving certificate
  ``<host>@<unix time>`` signed by it, valid from one hour ago for one year. The serving certificate
  names DNS ``localhost``, ``kubernetes``, ``kubernetes.default``, ``kubernetes.default.svc`` and
  IP 127.0.0.1 (plus the bind address when it is an IP), so hostname checks pass for the URL
  kube-sim prints. Keys are ECDSA P-256 (fast to make; every client accepts them).
- The private key never rests on disk: Python's ``ssl`` only loads chains from files, so the PEM is
  written to a private (0700) temporary directory, loaded, and the directory removed at once.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["ServingCert", "generate"]

_DNS_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes  # what clients trust (the kubeconfig's certificate-authority-data)
    chain_pem: bytes  # serving certificate then CA
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory(prefix="kube-sim-serving-") as tmp:  # created 0700
            cert_path = Path(tmp) / "tls.crt"
            key_path = Path(tmp) / "tls.key"
            cert_path.write_bytes(self.chain_pem)
            key_path.touch(mode=0o600)
            key_path.write_bytes(self.key_pem)
            ctx.load_cert_chain(str(cert_path), str(key_path))
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A client context trusting this CA only (for in-process callers and tests)."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=cert_sign,
                         content_commitment=False, data_encipherment=False, key_agreement=False, crl_sign=False,
                         encipher_only=False, decipher_only=False)


def generate(bind_host: str = "127.0.0.1", now: dt.datetime | None = None,
             dns_names: tuple[str, ...] = _DNS_NAMES) -> ServingCert:
    """``dns_names``: the names the serving certificate is valid for (kube-sim's own by default; a test's
    webhook server names its Service's ``<name>.<namespace>.svc``)."""
    now = now or dt.datetime.now(dt.UTC)
    stamp = int(now.timestamp())
    not_before, not_after = now - dt.timedelta(hours=1), now + dt.timedelta(days=365)
    host = "localhost"

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{host}-ca@{stamp}")
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    ips = {ipaddress.ip_address("127.0.0.1")}
    try:
        bind_ip = ipaddress.ip_address(bind_host)
    except ValueError:
        bind_ip = None
    if bind_ip is not None:
        ips.add(bind_ip)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(_name(f"{host}@{stamp}")).issuer_name(ca_name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return ServingCert(ca_pem, cert.public_bytes(serialization.Encoding.PEM) + ca_pem, key_pem)
