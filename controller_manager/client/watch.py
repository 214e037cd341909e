"""A watch: the API server's stream of line-delimited JSON events, as an async iterator.

Guarantees:
- Events come out in the order the server sent them, each parsed once into a plain dict:
  ``WatchEvent(type, object)`` with type ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``. The parser is
  orjson unless the caller passes ``decode`` (line -> (type, object)), which an informer uses to decode
  straight into its cached form.
- Lines of any length are handled (objects past 64 KiB included): the stream is split on newlines
  by hand, never through ``StreamReader.readline`` and its line-length limit.
- An ``ERROR`` event raises the :class:`~controller_manager.client.errors.ApiError` its Status
  describes (``Gone`` for 410 "too old resource version"); every event before it is delivered first.
- A clean end of stream (the server's ``timeoutSeconds``, or it closing the response) ends the
  iteration. A broken stream (reset, truncated chunk, read timeout) raises ``ApiConnectionError``.
  An undecodable line raises ``ServerError``. Either way the caller re-watches from the last
  resourceVersion it saw.
- The HTTP request is only sent on the first ``__anext__``; ``aclose()`` (or leaving ``async with``)
  drops the connection. The stream closes itself once it ends or raises.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from controller_manager.client.errors import ApiConnectionError, ApiError, ServerError, error_from_status


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK"
    object: dict[str, Any]


Decode = Callable[[bytes | memoryview], tuple[str, Any]]


def plain_decode(line: bytes | memoryview) -> tuple[str, Any]:
    """A watch event line as sent: ``(type, object)`` parsed by orjson."""
    event = orjson.loads(line)
    return event["type"], event["object"]


class WatchStream:
    """``async for event in client.watch(...)``; also an async context manager."""

    __slots__ = ("_closed", "_decode", "_open", "_partial", "_pending", "_resp")

    def __init__(
        self, open_response: Callable[[], Awaitable[aiohttp.ClientResponse]], decode: Decode | None = None
    ) -> None:
        self._open = open_response
        self._decode = decode or plain_decode
        self._resp: aiohttp.ClientResponse | None = None
        self._pending: deque[WatchEvent | ApiError] = deque()
        self._partial: list[bytes] = []
        self._closed = False

    def __aiter__(self) -> WatchStream:
        return self

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._pending.clear()
        self._partial.clear()
        resp, self._resp = self._resp, None
        if resp is not None:
            # The body is unread: close the connection rather than hand a half-read one back to the pool.
            resp.close()

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._pending:
                item = self._pending.popleft()
                if isinstance(item, ApiError):
                    await self.aclose()
                    raise item
                return item
            if self._closed:
                raise StopAsyncIteration
            if self._resp is None:
                try:
                    self._resp = await self._open()
                except BaseException:
                    self._closed = True
                    raise
            await self._read_more(self._resp)

    async def _read_more(self, resp: aiohttp.ClientResponse) -> None:
        try:
            chunk = await resp.content.readany()
        except (aiohttp.ClientError, TimeoutError) as exc:
            await self.aclose()
            raise ApiConnectionError(f"watch stream broken: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            await self.aclose()
            raise
        if not chunk:
            if self._partial:
                line = b"".join(self._partial)
                self._partial.clear()
                self._handle(line)
            self._resp = None
            self._closed = True
            resp.release()
            return
        self._split(chunk)

    def _split(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        start = 0
        nl = chunk.find(b"\n")
        if nl < 0:
            self._partial.append(chunk)
            return
        if self._partial:
            self._partial.append(chunk[:nl])
            line = b"".join(self._partial)
            self._partial.clear()
            self._handle(line)
            start = nl + 1
            nl = chunk.find(b"\n", start)
        while nl >= 0:
            if nl > start:
                self._handle(view[start:nl])
            start = nl + 1
            nl = chunk.find(b"\n", start)
        if start < len(chunk):
            self._partial.append(chunk[start:])

    def _handle(self, line: bytes | memoryview) -> None:
        try:
            typ, obj = self._decode(line)
        except (ValueError, KeyError, TypeError) as exc:  # orjson.JSONDecodeError is a ValueError
            if not bytes(line).strip():
                return
            self._pending.append(
                ServerError(500, "InternalError", f"unable to decode watch event: {exc}", None, bytes(line)[:512])
            )
            return
        if typ == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            self._pending.append(error_from_status(status))
            return
        self._pending.append(WatchEvent(typ, obj))
