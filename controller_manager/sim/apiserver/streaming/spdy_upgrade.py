"""The connect subresources over a plain SPDY/3.1 upgrade: what kubectl falls back to when a WebSocket upgrade is
refused (``KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`` and ``KUBECTL_PORT_FORWARD_WEBSOCKETS=false`` ask for it),
and what client-go's SPDY executors and dialers speak.

The client POSTs (or GETs) with ``Connection: Upgrade``, ``Upgrade: SPDY/3.1`` and one
``X-Stream-Protocol-Version`` header per protocol it knows; the server picks the first one it also knows and
answers ``101 Switching Protocols`` with it. For exec and attach (``v4.channel.k8s.io`` and earlier) the
client then opens one stream per standard stream it asked for (``streamType`` error, stdin, stdout, stderr,
resize with a TTY); the server writes output on them, the outcome on the error stream (a Status JSON from v4
on, else the error's text), closes them and the connection. SPDY streams half-close, so stdin ends with the
client's FIN. Port-forward (``portforward.k8s.io``) pairs streams as the tunneled form does.

Here, as in the API server, the request is proxied to the kubelet: the kubelet's own words reach the client
unwrapped (``unable to upgrade connection: container not found ("c")`` from the kubelet's plain-text 500, a
non-zero exit as containerd reports it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, cast

import orjson
from aiohttp import web

from controller_manager.sim.apiserver.streaming.spdy import SpdyProtocolError, SpdySession, SpdyStream
from controller_manager.sim.containers.process import Input, Writer

__all__ = ["EXEC_PROTOCOLS", "PORT_FORWARD_PROTOCOLS", "SpdyConnection", "is_spdy_upgrade", "negotiate",
           "run_remote_command", "upgrade"]

Obj = dict[str, Any]
# The CRI streaming server's versions: v5 (the close signal) exists only for WebSockets, SPDY half-closes.
EXEC_PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORT_FORWARD_PROTOCOLS = ("portforward.k8s.io",)
STREAM_CREATION_TIMEOUT = 30.0


def is_spdy_upgrade(request: web.Request) -> bool:
    connection = request.headers.get("Connection", "").lower()
    return request.headers.get("Upgrade", "").lower().startswith("spdy/") and "upgrade" in connection


def negotiate(request: web.Request, supported: tuple[str, ...]) -> str:
    """The first protocol the client lists that the server knows (httpstream.Handshake); 403 text if none."""
    offered = [p.strip() for value in request.headers.getall("X-Stream-Protocol-Version", [])
               for p in value.split(",") if p.strip()]
    if not offered:
        return ""  # a client from before negotiation: the first protocol
    for protocol in offered:
        if protocol in supported:
            return protocol
    raise web.HTTPForbidden(text=f"unable to upgrade: unable to negotiate protocol: client supports "
                                 f"[{' '.join(offered)}], server supports [{' '.join(supported)}]")


class _RawParser:
    """Takes the place of the HTTP parser once the connection is upgraded: every byte goes to the queue."""

    def __init__(self, queue: asyncio.Queue[bytes]) -> None:
        self.queue = queue

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.queue.put_nowait(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")


class SpdyConnection:
    """An upgraded connection carrying SPDY: its session and the streams the client opens."""

    def __init__(self, request: web.Request, queue: asyncio.Queue[bytes]) -> None:
        transport = request.transport
        assert transport is not None
        self.transport = transport
        self.queue = queue
        self.new_streams: asyncio.Queue[SpdyStream] = asyncio.Queue()
        self.session = SpdySession(self._send, self.new_streams.put_nowait)

    async def _send(self, frame: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(frame)

    async def pump(self) -> None:
        """Feed the session what arrives until the client closes the connection."""
        try:
            while data := await self.queue.get():
                await self.session.feed(data)
                if self.session.gone_away:
                    break
        except SpdyProtocolError:
            pass
        finally:
            self.session.close_all()

    async def streams(self, wanted: set[str]) -> dict[str, SpdyStream] | None:
        """Wait for the client's streams of the ``wanted`` types (None if they do not all come in time)."""
        found: dict[str, SpdyStream] = {}
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
                while not wanted <= set(found):
                    stream = await self.new_streams.get()
                    found[stream.headers.get("streamtype", "")] = stream
        return found if wanted <= set(found) else None

    def close(self) -> None:
        self.transport.close()


async def upgrade(request: web.Request, protocol: str) -> tuple[web.StreamResponse, SpdyConnection]:
    """Answer 101 and take the connection over."""
    headers = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
    if protocol:
        headers["X-Stream-Protocol-Version"] = protocol
    response = web.StreamResponse(status=101, headers=headers)
    await response.prepare(request)
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    request.protocol.set_parser(cast(Any, _RawParser(queue)))
    request.protocol.keep_alive(False)
    return response, SpdyConnection(request, queue)


Work = Callable[[Input, Writer, Writer], Awaitable[Obj]]


async def run_remote_command(conn: SpdyConnection, protocol: str, stdin: bool, stdout: bool, stderr: bool, tty: bool,
                             work: Work) -> None:
    """The kubelet's remotecommand server over SPDY: gather the streams, run ``work(stdin, stdout, stderr)``,
    write its Status on the error stream, close everything. A client that goes away stops the work."""
    pump = asyncio.ensure_future(conn.pump())
    tasks: list[asyncio.Future[Any]] = [pump]
    try:
        wanted = {"error"} | {name for name, on in (("stdin", stdin), ("stdout", stdout),
                                                    ("stderr", stderr and not tty)) if on}
        if tty and protocol not in ("channel.k8s.io", "v2.channel.k8s.io", ""):
            wanted.add("resize")
        streams = await conn.streams(wanted)
        if streams is None:
            return
        source = streams.get("stdin")
        input_ = Input() if source is not None else Input(b"")

        async def copy_stdin() -> None:
            while source is not None and (chunk := await source.read()):
                input_.feed(chunk)
            input_.close()

        async def out(data: bytes) -> None:
            if "stdout" in streams:
                await streams["stdout"].write(data)

        async def err(data: bytes) -> None:
            if "stderr" in streams:
                await streams["stderr"].write(data)
            elif tty:
                await out(data)

        tasks.append(asyncio.ensure_future(copy_stdin()))
        running = asyncio.ensure_future(work(input_, out, err))
        tasks.append(running)
        await asyncio.wait([running, pump], return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            return  # the client went away
        status = running.result()
        bare = {k: v for k, v in status.items() if k not in ("kind", "apiVersion")}
        if protocol == "v4.channel.k8s.io":
            await streams["error"].write(orjson.dumps(bare))
        elif bare.get("status") != "Success":
            await streams["error"].write(str(bare.get("message") or "").encode())
        for stream in streams.values():
            await stream.close()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        conn.close()
