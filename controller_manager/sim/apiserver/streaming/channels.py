"""The server side of the Kubernetes channel WebSocket protocols (apimachinery's wsstream), for exec and attach.

Subprotocols, in the API server's order of preference: ``v5.channel.k8s.io`` (kubectl 1.30+ offers only this),
``v4.channel.k8s.io``, ``v4.base64.channel.k8s.io``, ``channel.k8s.io``, ``base64.channel.k8s.io``; a
client naming none gets plain ``channel.k8s.io``. Each binary message is one channel byte then data:
0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize (JSON ``{"Width":w,"Height":h}``); base64 protocols send text
messages, the channel as an ASCII digit and the data base64-encoded. v5 adds the close signal
``[255, channel]`` (the client closing its stdin). The error channel carries, from v4 on, one
``metav1.Status`` as JSON (no kind/apiVersion, as json.Marshal of a bare Status writes it): Success, or
Failure with reason ``NonZeroExitCode`` and an ``ExitCode`` cause, or an InternalError; before v4, the
error's text. Then the server closes the connection normally.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import WSMessage, WSMsgType, web

__all__ = ["ERROR", "PROTOCOLS", "RESIZE", "STDERR", "STDIN", "STDOUT", "ChannelConnection"]

V5 = "v5.channel.k8s.io"
PROTOCOLS = (V5, "v4.channel.k8s.io", "v4.base64.channel.k8s.io", "channel.k8s.io", "base64.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
# How long a server's close waits for the client's close frame: the API server closes the connection without
# waiting, and a client that never answers (the official Python client) must not hold the handler.
CLOSE_WAIT = 1.0
_FRAME_DATA = 32 * 1024


def decoded(conn: ChannelConnection, msg: WSMessage) -> bytes | None:
    """A message as channel byte + data (base64 text decoded), or None for one that carries nothing."""
    if msg.type == WSMsgType.BINARY:
        data: bytes = msg.data
    elif msg.type == WSMsgType.TEXT and conn.base64 and msg.data:
        text: str = msg.data
        try:
            data = bytes([ord(text[0]) - ord("0")]) + base64.b64decode(text[1:])
        except ValueError:
            return None
    else:
        return None
    return data or None


class ChannelConnection:
    """One upgraded exec or attach connection: writes by channel, reads stdin, resize and close signals."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.protocol = ws.ws_protocol or "channel.k8s.io"
        self.base64 = "base64" in self.protocol
        self.v5 = self.protocol == V5
        self.structured_errors = self.protocol.startswith(("v4.", "v5."))

    async def write(self, channel: int, data: bytes) -> None:
        if not data or self.ws.closed:
            return
        with contextlib.suppress(ConnectionResetError):
            for start in range(0, len(data), _FRAME_DATA):  # a large output goes as many messages
                piece = data[start:start + _FRAME_DATA]
                if self.base64:
                    await self.ws.send_str(chr(ord("0") + channel) + base64.b64encode(piece).decode())
                else:
                    await self.ws.send_bytes(bytes([channel]) + piece)

    async def write_status(self, status: dict[str, Any]) -> None:
        """The request's outcome on the error channel."""
        bare = {k: v for k, v in status.items() if k not in ("kind", "apiVersion")}
        if self.structured_errors:
            await self.write(ERROR, orjson.dumps(bare))
        elif bare.get("status") != "Success":
            await self.write(ERROR, str(bare.get("message") or "").encode())

    async def read(self, on_stdin: Callable[[bytes], None], on_stdin_closed: Callable[[], None],
                   on_resize: Callable[[int, int], None]) -> None:
        """Dispatch what the client sends until it closes the connection (stdin ends then too)."""
        try:
            async for msg in self.ws:
                data = decoded(self, msg)
                if data is None:
                    continue
                if self.v5 and data[0] == CLOSE:
                    if len(data) > 1 and data[1] == STDIN:
                        on_stdin_closed()
                    continue
                channel, payload = data[0], data[1:]
                if channel == STDIN:
                    on_stdin(payload)
                elif channel == RESIZE:
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        size = orjson.loads(payload)
                        on_resize(int(size["Width"]), int(size["Height"]))
        finally:
            on_stdin_closed()

    async def close(self) -> None:
        with contextlib.suppress(ConnectionResetError):
            await self.ws.close()
