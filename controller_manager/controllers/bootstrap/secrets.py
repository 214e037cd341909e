"""Bootstrap token Secrets (``k8s.io/cluster-bootstrap/token/api`` and ``util/secrets``).

Guarantees:
- :func:`parse_name` accepts exactly ``bootstrap-token-<id>`` with a six-character ``[a-z0-9]`` id.
- :func:`get_data` is a Secret's decoded ``data[key]`` (``""`` when missing or not base64).
- :func:`get_expiration` is ``GetExpiration``: no ``expiration`` means never expires; an RFC 3339 time in the
  past (or now), or one that does not parse, is expired; otherwise the seconds left.
- :func:`validate_secret_for_signing` is the bootstrap signer's ``validateSecretForSigning``: the name's id must
  equal ``token-id``, ``token-secret`` must be set, the token not expired and ``usage-bootstrap-signing`` be
  ``"true"``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["BOOTSTRAP_TOKEN_SECRET_PREFIX", "SECRET_TYPE_BOOTSTRAP_TOKEN", "get_data", "get_expiration",
           "parse_name", "validate_secret_for_signing"]

SECRET_TYPE_BOOTSTRAP_TOKEN = "bootstrap.kubernetes.io/token"
BOOTSTRAP_TOKEN_SECRET_PREFIX = "bootstrap-token-"
TOKEN_ID_KEY = "token-id"
TOKEN_SECRET_KEY = "token-secret"
EXPIRATION_KEY = "expiration"
USAGE_SIGNING_KEY = "usage-bootstrap-signing"
CONFIGMAP_CLUSTER_INFO = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
JWS_SIGNATURE_KEY_PREFIX = "jws-kubeconfig-"

_NAME = re.compile(r"^" + re.escape(BOOTSTRAP_TOKEN_SECRET_PREFIX) + r"([a-z0-9]{6})$")
# time.RFC3339 as Go parses it: a date, 'T', a time with optional fraction, and Z or an offset.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")

Obj = Mapping[str, Any]


def parse_name(name: str) -> str | None:
    match = _NAME.match(name)
    return match.group(1) if match else None


def get_data(secret: Obj, key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    if value is None:
        return ""
    try:
        return base64.b64decode(str(value), validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return ""


def parse_rfc3339(text: str) -> float | None:
    if not _RFC3339.match(text):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def get_expiration(secret: Obj, now: float) -> tuple[float, bool]:
    """(seconds remaining, expired?)."""
    expiration = get_data(secret, EXPIRATION_KEY)
    if not expiration:
        return 0.0, False
    when = parse_rfc3339(expiration)
    if when is None:
        return 0.0, True  # unparseable: treated as expired
    remaining = when - now
    if remaining <= 0:
        return 0.0, True
    return remaining, False


def has_expired(secret: Obj, now: float) -> bool:
    return get_expiration(secret, now)[1]


def validate_secret_for_signing(secret: Obj, now: float) -> tuple[str, str] | None:
    """(token id, token secret) when the Secret may sign ``cluster-info``, else None."""
    name_id = parse_name(str((secret.get("metadata") or {}).get("name") or ""))
    if name_id is None:
        return None
    token_id = get_data(secret, TOKEN_ID_KEY)
    if not token_id or token_id != name_id:
        return None
    token_secret = get_data(secret, TOKEN_SECRET_KEY)
    if not token_secret:
        return None
    if has_expired(secret, now):
        return None
    if get_data(secret, USAGE_SIGNING_KEY) != "true":
        return None
    return token_id, token_secret
