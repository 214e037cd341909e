"""The serving certificate: the operator's files, or a self-signed one made in memory at start.

Guarantees:
- With ``--tls-cert-file``/``--tls-private-key-file`` the files are loaded as given (bad files raise
  ``ssl.SSLError``/``OSError``, which ``main`` reports in one line).
- Without them, a certificate is made as kube-controller-manager makes it
  (``certutil.GenerateSelfSignedCertKey("localhost", [127.0.0.1], nil)``): an RSA-2048 CA
  ``localhost-ca@<unix time>`` signing an RSA-2048 serving certificate ``localhost@<unix time>`` for DNS
  ``localhost`` and IP ``127.0.0.1``, valid from one hour ago for one year.
- The key never rests on disk: Python's ``ssl`` only loads chains from files, so the PEM is written to a
  private (0700) temporary directory, loaded, and the directory removed before this returns.
- TLS 1.2 is the minimum protocol version.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_KEY_SIZE = 2048


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate_self_signed(
    host: str = "localhost", ips: tuple[str, ...] = ("127.0.0.1",), now: dt.datetime | None = None
) -> tuple[bytes, bytes]:
    """``(certificate chain PEM, private key PEM)``: the serving certificate followed by its CA."""
    now = now or dt.datetime.now(dt.UTC)
    stamp = int(now.timestamp())
    not_before = now - dt.timedelta(hours=1)
    not_after = now + dt.timedelta(days=365)

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=_KEY_SIZE)
    ca_name = _name(f"{host}-ca@{stamp}")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True, content_commitment=False,
                          data_encipherment=False, key_agreement=False, crl_sign=False, encipher_only=False,
                          decipher_only=False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    key = rsa.generate_private_key(public_exponent=65537, key_size=_KEY_SIZE)
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    sans.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{host}@{stamp}"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                          content_commitment=False, data_encipherment=False, key_agreement=False, crl_sign=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return chain, key_pem


def _context() -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def server_ssl_context(cert_file: str = "", key_file: str = "") -> ssl.SSLContext:
    """A server context from the given files, or from a fresh in-memory self-signed certificate."""
    ctx = _context()
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file or None)
        return ctx
    chain, key = generate_self_signed()
    with tempfile.TemporaryDirectory(prefix="controller-manager-serving-") as tmp:  # created 0700
        cert_path = Path(tmp) / "tls.crt"
        key_path = Path(tmp) / "tls.key"
        cert_path.write_bytes(chain)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        ctx.load_cert_chain(str(cert_path), str(key_path))
    return ctx
