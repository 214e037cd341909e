"""Legacy ServiceAccount tokens: the JWTs kube-controller-manager's token generator signs for
``kubernetes.io/service-account-token`` Secrets (``pkg/serviceaccount/jwt.go`` and ``legacy.go``).

Guarantees:
- :func:`load_private_key` reads ``--service-account-private-key-file`` as ``keyutil.PrivateKeyFromFile`` does:
  the first PEM private key (PKCS#1 ``RSA PRIVATE KEY``, SEC1 ``EC PRIVATE KEY`` or PKCS#8 ``PRIVATE KEY``) that is
  RSA or ECDSA; anything else is :class:`InvalidKeyFile` with upstream's words.
- :class:`TokenGenerator` signs with RS256 for an RSA key, ES256/ES384/ES512 for a P-256/P-384/P-521 key (another
  curve is refused when the generator is built, as ``JWTTokenGenerator`` refuses it). The protected header is
  ``{"alg": ..., "kid": ...}``, ``kid`` being the unpadded base64url SHA-256 of the DER public key, as upstream's
  ``keyIDFromPublicKey``; ECDSA signatures are the fixed-width ``r || s`` JWS wants.
- :func:`legacy_claims` is ``LegacyClaims``: issuer ``kubernetes/serviceaccount``, ``sub``
  ``system:serviceaccount:<ns>:<name>`` and the four ``kubernetes.io/serviceaccount/...`` private claims; no
  ``exp``, ``iat`` or ``aud`` (legacy tokens never expire). Keys are serialized sorted, as go-jose writes a map.
- Only JWS framing is done here (base64url, JSON); every cryptographic operation is ``cryptography``'s.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

__all__ = ["LEGACY_ISSUER", "InvalidKeyFile", "PrivateKey", "TokenGenerator", "key_id", "legacy_claims",
           "load_private_key"]

LEGACY_ISSUER = "kubernetes/serviceaccount"
NAMESPACE_CLAIM = "kubernetes.io/serviceaccount/namespace"
SECRET_NAME_CLAIM = "kubernetes.io/serviceaccount/secret.name"
SERVICE_ACCOUNT_NAME_CLAIM = "kubernetes.io/serviceaccount/service-account.name"
SERVICE_ACCOUNT_UID_CLAIM = "kubernetes.io/serviceaccount/service-account.uid"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

# curve -> (JWS algorithm, hash, bytes of each of r and s)
_EC_ALGORITHMS: dict[str, tuple[str, hashes.HashAlgorithm, int]] = {
    "secp256r1": ("ES256", hashes.SHA256(), 32),
    "secp384r1": ("ES384", hashes.SHA384(), 48),
    "secp521r1": ("ES512", hashes.SHA512(), 66),
}
_PEM_BEGIN = b"-----BEGIN "


class InvalidKeyFile(ValueError):
    """The private key file cannot be read or holds no RSA or ECDSA private key."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _pem_blocks(data: bytes) -> list[bytes]:
    """Each ``-----BEGIN ...----- ... -----END ...-----`` block of ``data``, in order."""
    blocks: list[bytes] = []
    rest = data
    while True:
        start = rest.find(_PEM_BEGIN)
        if start < 0:
            return blocks
        end = rest.find(b"-----END ", start)
        if end < 0:
            return blocks
        close = rest.find(b"-----", end + 9)
        if close < 0:
            return blocks
        blocks.append(rest[start:close + 5])
        rest = rest[close + 5:]


def load_private_key(path: str) -> PrivateKey:
    """The first RSA or ECDSA private key in the PEM file ``path`` (``keyutil.PrivateKeyFromFile``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise InvalidKeyFile(f"error reading private key file {path}: {err.strerror or err}") from err
    for block in _pem_blocks(data):
        if b"PRIVATE KEY-----" not in block.split(b"\n", 1)[0]:
            continue
        try:
            key = serialization.load_pem_private_key(block, password=None)
        except (ValueError, TypeError):
            continue
        if isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            return key
    raise InvalidKeyFile(f"error reading private key file {path}: data does not contain a valid RSA or ECDSA "
                         "private key")


def key_id(public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey) -> str:
    """upstream's ``keyIDFromPublicKey``: unpadded base64url of the SHA-256 of the PKIX DER public key."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def legacy_claims(service_account: Mapping[str, Any], secret: Mapping[str, Any]) -> dict[str, str]:
    """The claims of a legacy token for ``service_account`` stored in ``secret`` (``LegacyClaims``), with the
    issuer the generator adds."""
    sa_meta = service_account.get("metadata") or {}
    namespace = str(sa_meta.get("namespace") or "")
    name = str(sa_meta.get("name") or "")
    return {
        "iss": LEGACY_ISSUER,
        NAMESPACE_CLAIM: namespace,
        SECRET_NAME_CLAIM: str((secret.get("metadata") or {}).get("name") or ""),
        SERVICE_ACCOUNT_NAME_CLAIM: name,
        SERVICE_ACCOUNT_UID_CLAIM: str(sa_meta.get("uid") or ""),
        "sub": f"system:serviceaccount:{namespace}:{name}",
    }


class TokenGenerator:
    """Signs claims into a compact JWS with one private key (``serviceaccount.JWTTokenGenerator``)."""

    def __init__(self, key: PrivateKey) -> None:
        self.key = key
        if isinstance(key, rsa.RSAPrivateKey):
            self.algorithm = "RS256"
        else:
            found = _EC_ALGORITHMS.get(key.curve.name)
            if found is None:
                raise InvalidKeyFile(f"unknown private key curve, must be 256, 384, or 521, got {key.curve.name}")
            self.algorithm = found[0]
        self.kid = key_id(key.public_key())

    def generate(self, claims: Mapping[str, Any]) -> str:
        header = {"alg": self.algorithm, "kid": self.kid}
        signing_input = (f"{_b64(orjson.dumps(header, option=orjson.OPT_SORT_KEYS))}."
                         f"{_b64(orjson.dumps(dict(claims), option=orjson.OPT_SORT_KEYS))}").encode("ascii")
        return f"{signing_input.decode('ascii')}.{_b64(self._sign(signing_input))}"

    def _sign(self, data: bytes) -> bytes:
        if isinstance(self.key, rsa.RSAPrivateKey):
            return self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())
        _, digest, size = _EC_ALGORITHMS[self.key.curve.name]
        r, s = decode_dss_signature(self.key.sign(data, ec.ECDSA(digest)))
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
