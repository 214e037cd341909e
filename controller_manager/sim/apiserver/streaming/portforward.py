"""``pods/<name>/portforward``: the port-forward protocol over a tunneled SPDY connection, the kubelet's side.

The client (kubectl) opens, per forwarded connection, two SPDY streams sharing a ``requestID`` header: an
``error`` stream (it closes its half at once and reads until the server's FIN) and a ``data`` stream, each
with the remote ``port``. Once both are open the kubelet connects to the port inside the pod; a connection
that cannot be made is written on the error stream as ``error forwarding port <p> to pod <sandbox id>,
uid : <containerd's error>`` (the CRI names the sandbox, not the pod's uid, so that part is empty). Both
streams are then closed by the server.

kube-sim's pods listen on the TCP ``containerPort``s their containers declare, while Running: each accepted
connection reads one HTTP request and answers it (:meth:`ContainerRuntime.http_answer`), then closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web

from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.streaming import channels
from controller_manager.sim.apiserver.streaming.spdy import SpdyProtocolError, SpdySession, SpdyStream
from controller_manager.sim.apiserver.streaming.spdy_upgrade import SpdyConnection
from controller_manager.sim.containers import shell
from controller_manager.sim.containers.runtime import ContainerRuntime, sandbox_id

__all__ = ["TUNNEL_PROTOCOLS", "ports_of", "serve_channels", "serve_spdy", "serve_tunnel"]

Obj = dict[str, Any]
TUNNEL_PROTOCOLS = ("SPDY/3.1+portforward.k8s.io",)
_REQUEST_LIMIT = 64 * 1024


class _Pairs:
    """The error and data streams of each request, matched by their requestID header."""

    def __init__(self, start: Callable[[SpdyStream, SpdyStream], None]) -> None:
        self.start = start
        self.waiting: dict[str, dict[str, SpdyStream]] = {}

    def add(self, stream: SpdyStream) -> None:
        kind = stream.headers.get("streamtype", "")
        request_id = stream.headers.get("requestid", str(stream.id))
        if kind not in ("error", "data"):
            self.start(stream, stream)  # an unknown stream type: the forwarder resets it
            return
        pair = self.waiting.setdefault(request_id, {})
        pair[kind] = stream
        if len(pair) == 2:
            del self.waiting[request_id]
            self.start(pair["error"], pair["data"])


async def _connect(pod: Obj, port: int, read: Callable[[], Awaitable[bytes]], write: Callable[[bytes], Awaitable[None]],
                   write_error: Callable[[bytes], Awaitable[None]]) -> None:
    """One forwarded connection: the simulated server's answer to one request, or the kubelet's error."""
    container = ContainerRuntime.listener(pod, port) if (pod.get("status") or {}).get("phase") == "Running" else None
    if container is None:
        why = ContainerRuntime.refused(pod, port)
        await write_error(f"error forwarding port {port} to pod {sandbox_id(pod)}, uid : {why}".encode())
        return
    request = b""
    while b"\r\n\r\n" not in request and len(request) < _REQUEST_LIMIT:
        chunk = await read()
        if not chunk:
            break
        request += chunk
    if request:
        await write(ContainerRuntime.http_answer(pod, container, port))


async def _forward(pod: Obj, error: SpdyStream, data: SpdyStream) -> None:
    if error is data:
        await data.reset()
        return
    try:
        port = int(data.headers.get("port", ""))
    except ValueError:
        port = 0
    try:
        await _connect(pod, port, data.read, data.write, error.write)
    finally:
        await data.close()
        await error.close()


async def serve_tunnel(request: web.Request, pod: Obj, sessions: set[web.WebSocketResponse]
                       ) -> web.WebSocketResponse:
    """Accept the WebSocket and run the SPDY connection it carries until the client goes."""
    ws = web.WebSocketResponse(protocols=TUNNEL_PROTOCOLS, autoping=True, timeout=channels.CLOSE_WAIT)
    await ws.prepare(request)
    sessions.add(ws)
    tasks: set[asyncio.Task[None]] = set()

    async def send(frame: bytes) -> None:
        if not ws.closed:
            with contextlib.suppress(ConnectionResetError):
                await ws.send_bytes(frame)

    def start(error: SpdyStream, data: SpdyStream) -> None:
        task = asyncio.ensure_future(_forward(pod, error, data))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    pairs = _Pairs(start)
    session = SpdySession(send, pairs.add)
    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY:
                continue
            try:
                await session.feed(msg.data)
            except SpdyProtocolError:
                break
            if session.gone_away:
                break
    finally:
        sessions.discard(ws)
        session.close_all()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(ConnectionResetError):
            await ws.close()
    return ws


def ports_of(query: Any) -> list[int]:
    """PodPortForwardOptions.ports: repeated or comma-separated; 400 for one that is not a port number."""
    ports: list[int] = []
    for value in query.getall("ports", []):
        for text in str(value).split(","):
            try:
                port = int(text)
            except ValueError:
                raise errors.bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None
            if not 0 < port < 65536:
                raise errors.bad_request(f"port {port} must be > 0 and < 65536")
            ports.append(port)
    if not ports:
        raise errors.bad_request('query parameter "port" is required')
    return ports


async def serve_channels(request: web.Request, pod: Obj, ports: list[int], sessions: set[web.WebSocketResponse]
                         ) -> web.WebSocketResponse:
    """The kubelet's WebSocket port-forward (``v4.channel.k8s.io`` and kin, what client libraries speak): two
    channels per port, data (2i) and error (2i+1), each opened by the server with the port as two
    little-endian bytes; one connection per port and WebSocket."""
    ws = web.WebSocketResponse(protocols=channels.PROTOCOLS[1:], autoping=True, timeout=channels.CLOSE_WAIT)
    await ws.prepare(request)
    sessions.add(ws)
    conn = channels.ChannelConnection(ws)
    inputs = [shell.Input() for _ in ports]
    for index, port in enumerate(ports):
        for channel in (2 * index, 2 * index + 1):
            await conn.write(channel, port.to_bytes(2, "little"))

    def writer(channel: int) -> Callable[[bytes], Awaitable[None]]:
        async def write(data: bytes) -> None:
            await conn.write(channel, data)
        return write

    async def received() -> None:
        async for msg in ws:
            data = channels.decoded(conn, msg)
            if data is not None and data[0] % 2 == 0 and data[0] // 2 < len(inputs):
                inputs[data[0] // 2].feed(data[1:])
        for stdin in inputs:
            stdin.close()

    reader = asyncio.ensure_future(received())
    try:
        await asyncio.gather(*(_connect(pod, port, inputs[i].read, writer(2 * i), writer(2 * i + 1))
                               for i, port in enumerate(ports)))
    finally:
        sessions.discard(ws)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await conn.close()
    return ws


async def serve_spdy(conn: SpdyConnection, pod: Obj) -> None:
    """Port-forward over a plain SPDY upgrade: the same stream pairs, until the client closes the connection."""
    tasks: set[asyncio.Task[None]] = set()

    def start(error: SpdyStream, data: SpdyStream) -> None:
        task = asyncio.ensure_future(_forward(pod, error, data))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    pairs = _Pairs(start)

    async def accept() -> None:
        while True:
            pairs.add(await conn.new_streams.get())

    pump = asyncio.ensure_future(conn.pump())
    acceptor = asyncio.ensure_future(accept())
    try:
        await pump
    finally:
        for task in [acceptor, *tasks]:
            task.cancel()
        await asyncio.gather(acceptor, *tasks, return_exceptions=True)
        conn.close()
