"""Legacy ServiceAccount tokens, as kube-apiserver authenticates them with ``--service-account-key-file``
(``pkg/serviceaccount/jwt.go`` with ``legacy.go``'s validator, lookup on).

Guarantees:
- :func:`load_public_keys` reads the key files as kube-apiserver does: every RSA or ECDSA public key, private
  key (its public half) or certificate (its key) in each PEM file; a file with none is a start-up error.
- Only tokens whose ``iss`` is ``kubernetes/serviceaccount`` are this authenticator's (others are left to the
  next one). The signature must verify with one of the keys (RS256/384/512, ES256/384/512); legacy tokens carry
  no audience, so they are good for the API server's own audiences only.
- The validator: ``sub`` and the four ``kubernetes.io/serviceaccount/...`` claims present and consistent; the
  Secret named in the token exists, is not being deleted and holds this very token (``Token has been
  invalidated`` / ``Token does not match server's copy``); the ServiceAccount exists, is not being deleted and
  has the claimed uid. A Secret labelled ``kubernetes.io/legacy-token-invalid-since`` is refused with upstream's
  message. A Secret its ServiceAccount lists (an auto-generated token) draws upstream's Warning.
- Usage tracking: an accepted (or invalidated) token's Secret gets ``kubernetes.io/legacy-token-last-used:
  <today>`` (UTC, merge patch carrying its uid) unless the label already says today or tomorrow.
- The user is ``system:serviceaccount:<ns>:<name>`` with the ServiceAccount's uid and groups, no extra.
- The keys are published beside kube-sim's own signing key in ``/openid/v1/jwks`` (:func:`jwk`), and their
  algorithms in the discovery document, as kube-apiserver publishes its ``--service-account-key-file`` keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from controller_manager.api.resources import SECRETS, SERVICEACCOUNTS
from controller_manager.sim.apiserver.auth.tokens import InvalidToken
from controller_manager.sim.apiserver.auth.users import User, service_account_user, split_service_account_username

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["AUTO_GENERATED_WARNING", "INVALID_SINCE_LABEL", "LAST_USED_LABEL", "LEGACY_ISSUER",
           "TRACKING_CONFIGMAP", "LegacyAuthenticator", "PublicKey", "load_public_keys", "tracking_config_map"]

Obj = dict[str, Any]
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

LEGACY_ISSUER = "kubernetes/serviceaccount"
LAST_USED_LABEL = "kubernetes.io/legacy-token-last-used"
INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"
TRACKING_CONFIGMAP = "kube-apiserver-legacy-service-account-token-tracking"
AUTO_GENERATED_WARNING = ("Use tokens from the TokenRequest API or manually created secret-based tokens instead of "
                          "auto-generated secret-based tokens.")
_NS = "kubernetes.io/serviceaccount/namespace"
_SECRET = "kubernetes.io/serviceaccount/secret.name"
_SA_NAME = "kubernetes.io/serviceaccount/service-account.name"
_SA_UID = "kubernetes.io/serviceaccount/service-account.uid"
_RSA_HASHES: dict[str, hashes.HashAlgorithm] = {"RS256": hashes.SHA256(), "RS384": hashes.SHA384(),
                                                "RS512": hashes.SHA512()}
_EC: dict[str, tuple[str, hashes.HashAlgorithm, int]] = {
    "ES256": ("secp256r1", hashes.SHA256(), 32), "ES384": ("secp384r1", hashes.SHA384(), 48),
    "ES512": ("secp521r1", hashes.SHA512(), 66)}


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _pem_blocks(data: bytes) -> list[bytes]:
    blocks: list[bytes] = []
    rest = data
    while (start := rest.find(b"-----BEGIN ")) >= 0:
        end = rest.find(b"-----END ", start)
        close = rest.find(b"-----", end + 9) if end >= 0 else -1
        if close < 0:
            break
        blocks.append(rest[start:close + 5])
        rest = rest[close + 5:]
    return blocks


def _public_key(block: bytes) -> PublicKey | None:
    head = block.split(b"\n", 1)[0]
    key: Any = None
    try:
        if b"CERTIFICATE" in head:
            key = x509.load_pem_x509_certificate(block).public_key()
        elif b"PRIVATE KEY" in head:
            key = serialization.load_pem_private_key(block, password=None).public_key()
        elif b"PUBLIC KEY" in head:
            key = serialization.load_pem_public_key(block)
    except (ValueError, TypeError):
        return None
    return key if isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey) else None


def load_public_keys(paths: Iterable[str]) -> list[PublicKey]:
    """Every RSA/ECDSA public key in the PEM files; ValueError naming a file that has none."""
    keys: list[PublicKey] = []
    for path in paths:
        data = Path(path).read_bytes()
        found = [k for k in (_public_key(b) for b in _pem_blocks(data)) if k is not None]
        if not found:
            raise ValueError(f"failed to parse service account key file {path}: data does not contain any valid "
                             "RSA or ECDSA public keys")
        keys.extend(found)
    return keys


def tracking_config_map(now: float) -> Obj:
    """The ConfigMap kube-apiserver writes once it tracks legacy token use (``legacytokentracking``)."""
    since = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": TRACKING_CONFIGMAP, "namespace": "kube-system"}, "data": {"since": since}}


def issuer_of(token: str) -> str | None:
    """The unverified ``iss`` of a JWT (the union authenticator asks each JWT authenticator only for its own)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = orjson.loads(_unb64(parts[1]))
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        return None
    iss = claims.get("iss") if isinstance(claims, dict) else None
    return iss if isinstance(iss, str) else None


def _verify(key: PublicKey, alg: str, signing_input: bytes, signature: bytes) -> bool:
    try:
        if isinstance(key, rsa.RSAPublicKey) and alg in _RSA_HASHES:
            key.verify(signature, signing_input, padding.PKCS1v15(), _RSA_HASHES[alg])
            return True
        if isinstance(key, ec.EllipticCurvePublicKey) and alg in _EC:
            curve, digest, size = _EC[alg]
            if key.curve.name != curve or len(signature) != 2 * size:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big"))
            key.verify(der, signing_input, ec.ECDSA(digest))
            return True
    except InvalidSignature:
        return False
    return False


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def algorithm(key: PublicKey) -> str:
    """The JWS algorithm a key signs with, as kube-apiserver lists it in its OIDC discovery document."""
    if isinstance(key, rsa.RSAPublicKey):
        return "RS256"
    return {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name, "")


def jwk(key: PublicKey) -> Obj:
    """The key as go-jose writes a public JSONWebKey (``kid``: base64url SHA-256 of its DER form)."""
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    out: Obj = {"use": "sig", "kid": _b64(hashlib.sha256(der).digest()), "alg": algorithm(key)}
    if isinstance(key, rsa.RSAPublicKey):
        numbers = key.public_numbers()
        out.update(kty="RSA", n=_b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                   e=_b64(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")))
    else:
        ec_numbers = key.public_numbers()
        size = (key.curve.key_size + 7) // 8
        out.update(kty="EC", crv={"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}.get(
            key.curve.name, key.curve.name), x=_b64(ec_numbers.x.to_bytes(size, "big")),
            y=_b64(ec_numbers.y.to_bytes(size, "big")))
    return out


@dataclass
class Outcome:
    """An accepted legacy token: its user and the warnings the request carries back."""

    user: User
    warnings: list[str] = field(default_factory=list)


class LegacyAuthenticator:
    def __init__(self, api: ApiServer, keys: list[PublicKey]) -> None:
        self.api = api
        self.keys = keys

    def handles(self, token: str) -> bool:
        return bool(self.keys) and issuer_of(token) == LEGACY_ISSUER

    def authenticate(self, token: str) -> Outcome:
        head, body, sig = token.split(".")
        try:
            header = orjson.loads(_unb64(head))
            claims = orjson.loads(_unb64(body))
            signature = _unb64(sig)
        except (ValueError, binascii.Error, orjson.JSONDecodeError):
            raise InvalidToken("invalid bearer token") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise InvalidToken("invalid bearer token")
        alg = str(header.get("alg") or "")
        signing_input = f"{head}.{body}".encode()
        if not any(_verify(key, alg, signing_input, signature) for key in self.keys):
            raise InvalidToken("invalid bearer token")
        return self._validate(token, claims)

    def _validate(self, token: str, claims: Obj) -> Outcome:
        subject = str(claims.get("sub") or "")
        if not subject:
            raise InvalidToken("sub claim is missing")
        namespace = str(claims.get(_NS) or "")
        if not namespace:
            raise InvalidToken("namespace claim is missing")
        secret_name = str(claims.get(_SECRET) or "")
        if not secret_name:
            raise InvalidToken("secretName claim is missing")
        sa_name = str(claims.get(_SA_NAME) or "")
        if not sa_name:
            raise InvalidToken("serviceAccountName claim is missing")
        sa_uid = str(claims.get(_SA_UID) or "")
        if not sa_uid:
            raise InvalidToken("serviceAccountUID claim is missing")
        if split_service_account_username(subject) != (namespace, sa_name):
            raise InvalidToken("sub claim is invalid")
        secret = self.api.stored_object(SECRETS, namespace, secret_name)
        if secret is None or secret["metadata"].get("deletionTimestamp"):
            raise InvalidToken("Token has been invalidated")
        stored = (secret.get("data") or {}).get("token") or ""
        try:
            stored_token = base64.b64decode(str(stored))
        except (ValueError, binascii.Error):
            stored_token = b""
        if not hmac.compare_digest(stored_token, token.encode()):
            raise InvalidToken("Token does not match server's copy")
        sa = self.api.stored_object(SERVICEACCOUNTS, namespace, sa_name)
        if sa is None:
            raise InvalidToken(f'serviceaccounts "{sa_name}" not found')
        if sa["metadata"].get("deletionTimestamp"):
            raise InvalidToken(f"ServiceAccount {namespace}/{sa_name} has been deleted")
        if sa["metadata"].get("uid") != sa_uid:
            raise InvalidToken(f"ServiceAccount UID ({sa['metadata'].get('uid')}) does not match claim ({sa_uid})")
        labels = secret["metadata"].get("labels") or {}
        if labels.get(INVALID_SINCE_LABEL):
            self._mark_used(secret)
            raise InvalidToken(f"the token in secret {namespace}/{secret_name} for service account "
                               f"{namespace}/{sa_name} has been marked invalid. Use tokens from the TokenRequest API "
                               "or manually created secret-based tokens, or remove the "
                               f"'{INVALID_SINCE_LABEL}' label from the secret to temporarily allow use of this token")
        warnings = []
        if any((ref or {}).get("name") == secret_name for ref in sa.get("secrets") or ()):
            warnings.append(AUTO_GENERATED_WARNING)
        self._mark_used(secret)
        return Outcome(service_account_user(namespace, sa_name, sa_uid), warnings)

    def _mark_used(self, secret: Obj) -> None:
        now = datetime.fromtimestamp(self.api.clock.now(), UTC)
        today = now.strftime("%Y-%m-%d")
        tomorrow = (now + timedelta(days=1)).strftime("%Y-%m-%d")
        meta = secret["metadata"]
        if (meta.get("labels") or {}).get(LAST_USED_LABEL) in (today, tomorrow):
            return
        patch = {"kind": "Secret", "apiVersion": "v1",
                 "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid"),
                              "labels": {LAST_USED_LABEL: today}}}
        try:
            self.api.patch(SECRETS, meta["namespace"], meta["name"], patch, "merge")
        except Exception:  # upstream logs a failed label write and authenticates anyway
            return
