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
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from controller_manager.sim.apiserver.streaming.spdy import SpdyProtocolError, SpdySession, SpdyStream
from controller_manager.sim.containers.runtime import ContainerRuntime, sandbox_id

__all__ = ["TUNNEL_PROTOCOLS", "serve_tunnel"]

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


async def _forward(pod: Obj, error: SpdyStream, data: SpdyStream) -> None:
    if error is data:
        await data.reset()
        return
    port_text = data.headers.get("port", "")
    try:
        port = int(port_text)
    except ValueError:
        port = 0
    container = ContainerRuntime.listener(pod, port) if (pod.get("status") or {}).get("phase") == "Running" else None
    try:
        if container is None:
            why = ContainerRuntime.refused(pod, port)
            await error.write(f"error forwarding port {port} to pod {sandbox_id(pod)}, uid : {why}".encode())
            return
        request = b""
        while b"\r\n\r\n" not in request and len(request) < _REQUEST_LIMIT:
            chunk = await data.read()
            if not chunk:
                break
            request += chunk
        if request:
            await data.write(ContainerRuntime.http_answer(pod, container, port))
    finally:
        await data.close()
        await error.close()


async def serve_tunnel(request: web.Request, pod: Obj) -> web.WebSocketResponse:
    """Accept the WebSocket and run the SPDY connection it carries until the client goes."""
    ws = web.WebSocketResponse(protocols=TUNNEL_PROTOCOLS, autoping=True)
    await ws.prepare(request)
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
        session.close_all()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(ConnectionResetError):
            await ws.close()
    return ws
