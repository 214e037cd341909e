"""The server half of a SPDY/3.1 connection, as much of it as Kubernetes' port-forward streams use.

kubectl 1.37 port-forwards over a WebSocket whose binary messages carry a SPDY connection (subprotocol
``SPDY/3.1+portforward.k8s.io``; the API server tunnels it to the kubelet). Frames (draft-mbelshe-spdy-3.1):
a control frame is ``1|version(15)|type(16)|flags(8)|length(24)|payload``, a data frame
``0|stream id(31)|flags(8)|length(24)|data``. The client opens streams with SYN_STREAM (its headers a
name/value block, zlib-compressed with the protocol's preset dictionary, one compression context per
direction for the whole connection), which the server accepts with SYN_REPLY; either side ends its half of a
stream with the FIN flag, RST_STREAM ends both; PINGs are echoed. Flow control (WINDOW_UPDATE) and SETTINGS
are read and ignored, as the moby/spdystream client kubectl uses ignores them too.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Awaitable, Callable

__all__ = ["DICTIONARY", "SpdyProtocolError", "SpdySession", "SpdyStream"]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_PROTOCOL_ERROR = 1
RST_CANCEL = 5

_DICTIONARY_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin",
)
_DICTIONARY_TAIL = (
    b"100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    b"203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    b"403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    b"Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    b"chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    b"text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
# The SPDY/3 header compression dictionary: length-prefixed header words, then common value text.
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICTIONARY_WORDS) + _DICTIONARY_TAIL


class SpdyProtocolError(Exception):
    pass


def _control(frame_type: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, frame_type, (flags << 24) | len(payload)) + payload


def _data(stream_id: int, flags: int, data: bytes) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(data)) + data


def parse_header_block(block: bytes) -> dict[str, str]:
    """A decompressed name/value block: names lowercased as SPDY sends them, multiple values NUL-joined."""
    if len(block) < 4:
        raise SpdyProtocolError("header block too short")
    (count,) = struct.unpack_from(">I", block)
    offset = 4
    headers: dict[str, str] = {}
    for _ in range(count):
        if offset + 4 > len(block):
            raise SpdyProtocolError("truncated header block")
        (size,) = struct.unpack_from(">I", block, offset)
        name = block[offset + 4:offset + 4 + size].decode()
        offset += 4 + size
        (size,) = struct.unpack_from(">I", block, offset)
        value = block[offset + 4:offset + 4 + size].decode()
        offset += 4 + size
        headers[name.lower()] = value
    return headers


def header_block(headers: dict[str, str]) -> bytes:
    out = struct.pack(">I", len(headers))
    for name, value in headers.items():
        out += struct.pack(">I", len(name)) + name.lower().encode() + struct.pack(">I", len(value)) + value.encode()
    return out


class SpdyStream:
    """One stream the client opened: its headers, what it sent (``read``), and the server's half."""

    def __init__(self, session: SpdySession, stream_id: int, headers: dict[str, str]) -> None:
        self.session = session
        self.id = stream_id
        self.headers = headers
        self._incoming: asyncio.Queue[bytes] = asyncio.Queue()
        self.remote_closed = False
        self.local_closed = False

    def _receive(self, data: bytes, fin: bool) -> None:
        if self.remote_closed:
            return
        if data:
            self._incoming.put_nowait(data)
        if fin:
            self.remote_closed = True
            self._incoming.put_nowait(b"")

    async def read(self) -> bytes:
        """The next chunk from the client, b"" once it closed its half (or reset the stream)."""
        if self.remote_closed and self._incoming.empty():
            return b""
        return await self._incoming.get()

    async def write(self, data: bytes) -> None:
        if data and not self.local_closed:
            await self.session.send(_data(self.id, 0, data))

    async def close(self) -> None:
        """End the server's half (a DATA frame with FIN)."""
        if not self.local_closed:
            self.local_closed = True
            await self.session.send(_data(self.id, FLAG_FIN, b""))

    async def reset(self, status: int = RST_CANCEL) -> None:
        self.local_closed = True
        self._receive(b"", True)
        await self.session.send(_control(RST_STREAM, 0, struct.pack(">II", self.id & 0x7FFFFFFF, status)))


class SpdySession:
    """Frames in from :meth:`feed`, frames out through ``send``; each new stream handed to ``on_stream``."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]],
                 on_stream: Callable[[SpdyStream], None]) -> None:
        self.send = send
        self.on_stream = on_stream
        self.streams: dict[int, SpdyStream] = {}
        self._buffer = b""
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
        self.gone_away = False

    def _compress(self, headers: dict[str, str]) -> bytes:
        return self._deflate.compress(header_block(headers)) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    async def feed(self, data: bytes) -> None:
        """Take bytes from the transport and act on every whole frame they complete."""
        self._buffer += data
        while len(self._buffer) >= 8:
            (word, flags_length) = struct.unpack_from(">II", self._buffer)
            length = flags_length & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                return
            flags = flags_length >> 24
            payload = self._buffer[8:8 + length]
            self._buffer = self._buffer[8 + length:]
            if word & 0x80000000:
                version, frame_type = (word >> 16) & 0x7FFF, word & 0xFFFF
                if version != VERSION:
                    raise SpdyProtocolError(f"unsupported SPDY version {version}")
                await self._control_frame(frame_type, flags, payload)
            else:
                stream = self.streams.get(word & 0x7FFFFFFF)
                if stream is not None:
                    stream._receive(payload, bool(flags & FLAG_FIN))

    async def _control_frame(self, frame_type: int, flags: int, payload: bytes) -> None:
        if frame_type == SYN_STREAM:
            (stream_id,) = struct.unpack_from(">I", payload)
            stream_id &= 0x7FFFFFFF
            try:
                headers = parse_header_block(self._inflate.decompress(payload[10:]))
            except (zlib.error, SpdyProtocolError, UnicodeDecodeError):
                await self.send(_control(RST_STREAM, 0, struct.pack(">II", stream_id, RST_PROTOCOL_ERROR)))
                return
            stream = SpdyStream(self, stream_id, headers)
            self.streams[stream_id] = stream
            await self.send(_control(SYN_REPLY, 0, struct.pack(">I", stream_id) + self._compress({})))
            if flags & FLAG_FIN:
                stream._receive(b"", True)
            self.on_stream(stream)
        elif frame_type == RST_STREAM:
            (stream_id,) = struct.unpack_from(">I", payload)
            reset = self.streams.pop(stream_id & 0x7FFFFFFF, None)
            if reset is not None:
                reset.local_closed = True
                reset._receive(b"", True)
        elif frame_type == PING:
            await self.send(_control(PING, 0, payload[:4]))
        elif frame_type == GOAWAY:
            self.gone_away = True
        elif frame_type == HEADERS:
            self._inflate.decompress(payload[4:])  # keep the compression context in step
        # SETTINGS and WINDOW_UPDATE: nothing to do.

    def close_all(self) -> None:
        """The transport ended: every stream's client half is over."""
        for stream in self.streams.values():
            stream._receive(b"", True)
            stream.local_closed = True
