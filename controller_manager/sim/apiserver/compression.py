"""Response compression as the apiserver's response writer applies it (APIResponseCompression, on by default).

Guarantees:
- A whole (non-streamed) answer longer than 128 KiB (strictly more than 131072 bytes) is gzip-compressed,
  level 1, when the request's Accept-Encoding lists the token ``gzip`` exactly (no parameters, as
  ``ContentEncodingSupported`` compares them); ``Content-Encoding: gzip`` and ``Vary: Accept-Encoding``
  are set. Smaller answers, watch streams, and answers their handler encoded already go out as they are.
"""

from __future__ import annotations

import gzip

from aiohttp import web

GZIP_THRESHOLD_BYTES = 128 * 1024
_GZIP_LEVEL = 1


def gzip_requested(accept_encoding: str) -> bool:
    return any(token.strip() == "gzip" for token in accept_encoding.split(","))


def maybe_gzip(resp: web.Response, accept_encoding: str) -> None:
    body = resp.body
    if not isinstance(body, bytes | bytearray) or len(body) <= GZIP_THRESHOLD_BYTES:
        return
    if "Content-Encoding" in resp.headers:  # encoded by its own handler already (the OpenAPI v2 document)
        return
    if not gzip_requested(accept_encoding):
        return
    resp.body = gzip.compress(bytes(body), compresslevel=_GZIP_LEVEL, mtime=0)
    resp.headers["Content-Encoding"] = "gzip"
    resp.headers.add("Vary", "Accept-Encoding")
