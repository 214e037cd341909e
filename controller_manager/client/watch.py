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
- :meth:`WatchStream.read_batch` is the same stream a read at a time, for a consumer that handles many events
  per second (an informer): every event one read of the socket completed, as ``(type, object)`` pairs, with no
  per-event await or wrapper object. Both ways of reading may be mixed on one stream; an error is raised once
  the events before it have been handed out, either way, and nothing after it is delivered.
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

    __slots__ = ("_closed", "_decode", "_error", "_open", "_partial", "_pending", "_resp")

    def __init__(
        self, open_response: Callable[[], Awaitable[aiohttp.ClientResponse]], decode: Decode | None = None
    ) -> None:
        self._open = open_response
        self._decode = decode or plain_decode
        self._resp: aiohttp.ClientResponse | None = None
        # Decoded events not handed out yet, then the error that ended the stream (no line after it is decoded).
        self._pending: deque[tuple[str, Any]] = deque()
        self._error: ApiError | None = None
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
        self._error = None
        self._partial.clear()
        resp, self._resp = self._resp, None
        if resp is not None:
            # The body is unread: close the connection rather than hand a half-read one back to the pool.
            resp.close()

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._pending:
                typ, obj = self._pending.popleft()
                return WatchEvent(typ, obj)
            await self._raise_error()
            if self._closed:
                raise StopAsyncIteration
            await self._read_more(await self._response())

    async def read_batch(self) -> list[tuple[str, Any]]:
        """The events of the next read of the stream (or those not handed out yet), in order, as ``(type,
        object)`` pairs; an empty list once the stream has ended."""
        while True:
            if self._pending:
                batch = list(self._pending)
                self._pending.clear()
                return batch
            await self._raise_error()
            if self._closed:
                return []
            await self._read_more(await self._response())

    async def _response(self) -> aiohttp.ClientResponse:
        if self._resp is None:
            try:
                self._resp = await self._open()
            except BaseException:
                self._closed = True
                raise
        return self._resp

    async def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            await self.aclose()
            raise error

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
        while nl >= 0 and self._error is None:
            if nl > start:
                self._handle(view[start:nl])
            start = nl + 1
            nl = chunk.find(b"\n", start)
        if start < len(chunk):
            self._partial.append(chunk[start:])

    def _handle(self, line: bytes | memoryview) -> None:
        if self._error is not None:
            return  # the stream ends at its first error
        try:
            event = self._decode(line)
        except (ValueError, KeyError, TypeError) as exc:  # orjson.JSONDecodeError is a ValueError
            if not bytes(line).strip():
                return
            self._error = ServerError(500, "InternalError", f"unable to decode watch event: {exc}", None,
                                      bytes(line)[:512])
            return
        if event[0] == "ERROR":
            status = event[1] if isinstance(event[1], dict) else {}
            self._error = error_from_status(status)
            return
        self._pending.append(event)
