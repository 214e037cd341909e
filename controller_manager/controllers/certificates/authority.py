"""A signing CA read from files, and upstream's permissive signing policy
(``pkg/controller/certificates/authority/``), over the ``cryptography`` package.

Guarantees:
- :class:`FileCA` reads the CA certificate (the first of the PEM file) and its private key, and reads them again
  whenever either file changes (size or mtime), as upstream's dynamic file content does; a file that cannot be
  read or parsed is :class:`ValueError`.
- :func:`sign` issues a leaf for the request: a random 128-bit serial, the request's subject and
  subjectAltNames, the request's key, none of the request's other extensions; key usage (critical) and extended
  key usage (in Go's ``x509.ExtKeyUsage`` order) from the CSR's usages (an unknown usage is
  ``unrecognized usage values: [...]``); basic constraints CA:FALSE (critical); the CA's subject key id as
  authority key id. NotBefore is now minus the 5-minute backdate, NotAfter NotBefore + TTL (now + TTL when the TTL
  is under 8 h), cut at the CA's own NotAfter; an expired CA signs nothing.
"""

from __future__ import annotations

import datetime
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

__all__ = ["BACKDATE", "SHORT", "CertificateAuthority", "FileCA", "SigningError", "boundaries", "sign"]

BACKDATE = 5 * 60.0
SHORT = 8 * 3600.0

_KEY_USAGES = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment", "cert sign": "key_cert_sign",
    "crl sign": "crl_sign", "encipher only": "encipher_only", "decipher only": "decipher_only",
}
# Go's x509.ExtKeyUsage values, in their numeric order (upstream sorts the set by it).
_EXT_ORDER: tuple[ObjectIdentifier, ...] = (
    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE, ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH,
    ExtendedKeyUsageOID.CODE_SIGNING, ExtendedKeyUsageOID.EMAIL_PROTECTION, ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
    ObjectIdentifier("1.3.6.1.5.5.7.3.6"), ObjectIdentifier("1.3.6.1.5.5.7.3.7"), ExtendedKeyUsageOID.TIME_STAMPING,
    ExtendedKeyUsageOID.OCSP_SIGNING, ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
    ObjectIdentifier("2.16.840.1.113730.4.1"),
)
_EXT_USAGES = {
    "any": 0, "server auth": 1, "client auth": 2, "code signing": 3, "email protection": 4, "s/mime": 4,
    "ipsec end system": 5, "ipsec tunnel": 6, "ipsec user": 7, "timestamping": 8, "ocsp signing": 9,
    "microsoft sgc": 10, "netscape sgc": 11,
}


class SigningError(Exception):
    """The CA cannot sign this request (bad usages, an expired CA)."""


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    certificate: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes


def _load(cert_file: str, key_file: str) -> CertificateAuthority:
    try:
        with open(cert_file, "rb") as f:
            certs = x509.load_pem_x509_certificates(f.read())
    except (OSError, ValueError) as err:
        raise ValueError(f"error reading CA cert file {cert_file!r}: {err}") from err
    try:
        with open(key_file, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"error reading CA key file {key_file!r}: {err}") from err
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
                      | ed448.Ed448PrivateKey):
        raise ValueError("error reading CA key file: key does not implement crypto.Signer")
    return CertificateAuthority(certs[0], key)


class FileCA:
    """The CA in ``cert_file`` / ``key_file``, read again when either changes."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._stamp = self._file_stamp()
        self._ca = _load(cert_file, key_file)

    def _file_stamp(self) -> tuple[tuple[int, int], ...]:
        out = []
        for path in (self.cert_file, self.key_file):
            try:
                st = os.stat(path)
            except OSError:
                out.append((-1, -1))
            else:
                out.append((st.st_mtime_ns, st.st_size))
        return tuple(out)

    def current(self) -> CertificateAuthority:
        stamp = self._file_stamp()
        if stamp != self._stamp:
            self._ca = _load(self.cert_file, self.key_file)
            self._stamp = stamp
        return self._ca


def _usages(usages: Sequence[str]) -> tuple[x509.KeyUsage | None, list[ObjectIdentifier]]:
    flags: set[str] = set()
    ext: set[int] = set()
    unknown = []
    for u in usages:
        if u in _KEY_USAGES:
            flags.add(_KEY_USAGES[u])
        elif u in _EXT_USAGES:
            ext.add(_EXT_USAGES[u])
        else:
            unknown.append(u)
    if unknown:
        raise SigningError("unrecognized usage values: [" + " ".join(f'"{u}"' for u in unknown) + "]")
    key_usage = None
    if flags:
        names = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
                 "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
        values = {n: n in flags for n in names}
        if (values["encipher_only"] or values["decipher_only"]) and not values["key_agreement"]:
            # X.509 gives these bits meaning only with keyAgreement; the library refuses them alone.
            raise SigningError("encipher only / decipher only usages need key agreement")
        key_usage = x509.KeyUsage(**values)
    return key_usage, [_EXT_ORDER[i] for i in sorted(ext)]


def boundaries(now: float, ttl: float, ca_not_after: float) -> tuple[float, float]:
    """NotBefore and NotAfter for a leaf of ``ttl`` seconds signed at ``now`` (upstream's ``boundaries``)."""
    if ttl <= BACKDATE:
        raise SigningError(f"requested ttl of {ttl}s should exceed backdate of {BACKDATE}s")
    not_before = now - BACKDATE
    not_after = not_before + ttl
    if ttl < SHORT:
        not_after = now + ttl
    not_after = min(not_after, ca_not_after)
    if not_before >= ca_not_after:
        raise SigningError("the signer has expired: NotAfter=" + _utc(ca_not_after).isoformat())
    if now >= ca_not_after:
        raise SigningError("refusing to sign a certificate that expired in the past: NotAfter="
                           + _utc(ca_not_after).isoformat())
    return not_before, not_after


def _utc(t: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(t, datetime.UTC)


def _hash_for(key: CertificateIssuerPrivateKeyTypes) -> hashes.SHA256 | hashes.SHA384 | hashes.SHA512 | None:
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return None
    if isinstance(key, ec.EllipticCurvePrivateKey):
        size = key.curve.key_size
        return hashes.SHA512() if size > 384 else hashes.SHA384() if size > 256 else hashes.SHA256()
    return hashes.SHA256()


def sign(ca: CertificateAuthority, request: x509.CertificateSigningRequest, usages: Sequence[str], ttl: float,
         now: float) -> bytes:
    """A PEM leaf certificate for ``request`` signed by ``ca`` (see the module's guarantees)."""
    if not request.is_signature_valid:
        raise SigningError("unable to verify certificate request signature")
    key_usage, ext_usages = _usages(usages)
    not_before, not_after = boundaries(now, ttl, ca.certificate.not_valid_after_utc.timestamp())
    builder = (x509.CertificateBuilder()
               .serial_number(secrets.randbelow(2**128) or 1)
               .subject_name(request.subject)
               .issuer_name(ca.certificate.subject)
               .public_key(request.public_key())
               .not_valid_before(_utc(not_before))
               .not_valid_after(_utc(not_after)))
    if key_usage is not None:
        builder = builder.add_extension(key_usage, critical=True)
    if ext_usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(ext_usages), critical=False)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    try:
        ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        ski = None
    if ski is not None:
        builder = builder.add_extension(x509.AuthorityKeyIdentifier(ski.digest, None, None), critical=False)
    try:
        san = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        san = None
    if san is not None:
        builder = builder.add_extension(san.value, critical=len(request.subject) == 0)
    cert = builder.sign(ca.key, _hash_for(ca.key))
    return cert.public_bytes(serialization.Encoding.PEM)
