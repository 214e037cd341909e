"""Detached JWS signatures over the ``cluster-info`` kubeconfig (``k8s.io/cluster-bootstrap/token/jws``).

Guarantees:
- :func:`compute_detached_signature` is ``ComputeDetachedSignature``: a compact HS256 JWS of ``content`` whose
  protected header is ``{"alg":"HS256","kid":"<token id>"}``, keyed with the token's secret part, with its
  payload part removed (``header..signature``), byte for byte what go-jose produces.
- :func:`detached_token_is_valid` is ``DetachedTokenIsValid``: recompute and compare (constant time).
- The HMAC is ``cryptography``'s; only the JWS framing is done here.
"""

from __future__ import annotations

import base64
import hmac as std_hmac
import json

from cryptography.hazmat.primitives import hashes, hmac

__all__ = ["compute_detached_signature", "detached_token_is_valid"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def compute_detached_signature(content: str, token_id: str, token_secret: str) -> str:
    # go-jose writes the protected header with its keys sorted and no spaces.
    header = _b64(('{"alg":"HS256","kid":' + _json_string(token_id) + "}").encode())
    signing_input = f"{header}.{_b64(content.encode())}".encode("ascii")
    mac = hmac.HMAC(token_secret.encode(), hashes.SHA256())
    mac.update(signing_input)
    return f"{header}..{_b64(mac.finalize())}"


def detached_token_is_valid(detached_token: str, content: str, token_id: str, token_secret: str) -> bool:
    expected = compute_detached_signature(content, token_id, token_secret)
    return std_hmac.compare_digest(detached_token.encode(), expected.encode())


def _json_string(text: str) -> str:
    """A JSON string as Go's encoding/json writes it (``<``, ``>`` and ``&`` escaped as \\u003c...)."""
    out = json.dumps(text, ensure_ascii=False)
    return out.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
