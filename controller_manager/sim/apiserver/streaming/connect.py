"""``pods/exec``, ``pods/attach`` and ``pods/portforward``: the connect subresources, as kube-apiserver serves them
with the kubelet and containerd behind it.

Before anything is upgraded the API server's own checks answer as plain Status errors (so a WebSocket client
sees a failed handshake and kubectl falls back to SPDY, which gets the same answer): the pod (404), the
container (400 ``container X is not valid for pod Y``, or which one to choose), a pod not yet scheduled
(400 ``pod X does not have a host assigned``). A WebSocket GET must also be allowed to ``create`` the
subresource (the ``AuthorizePodWebsocketUpgradeCreatePermission`` check, on by default since 1.35), beside the
``get`` every GET is authorized for. A plain SPDY upgrade is served as the kubelet serves it
(:mod:`spdy_upgrade`); a request that is neither is 400 ``Upgrade request required``.

After the upgrade the kubelet's answers come on the error channel, as the API server's stream translator
passes them on: ``Internal error occurred: unable to upgrade connection: container not found ("x")`` for a
container that is not running, an exit code as a ``NonZeroExitCode`` Failure, a command that cannot start as
an InternalError wrapping containerd's message.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import WSCloseCode, web

from controller_manager.api.resources import NODES, PODS, SERVICEACCOUNTS, Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth import User
from controller_manager.sim.apiserver.auth.tokens import API_AUDIENCES, Binding
from controller_manager.sim.apiserver.pod_logs import choose_container
from controller_manager.sim.apiserver.server import ApiServer
from controller_manager.sim.apiserver.streaming import channels, portforward, spdy_upgrade
from controller_manager.sim.containers import shell
from controller_manager.sim.containers.runtime import ContainerNotFound, ContainerRuntime

__all__ = ["CONNECT_SUBRESOURCES", "StreamingServer"]

Obj = dict[str, Any]
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})
_BARE_NEWLINE = re.compile(rb"(?<!\r)\n")


@dataclass
class _StreamOptions:
    container: str
    command: list[str]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def _flag(query: Mapping[str, str], key: str) -> bool:
    return query.get(key, "").lower() in ("1", "t", "true")


def _options(query: Any) -> _StreamOptions:
    return _StreamOptions(query.get("container", ""), list(query.getall("command", [])), _flag(query, "stdin"),
                          _flag(query, "stdout"), _flag(query, "stderr"), _flag(query, "tty"))


def _is_websocket(request: web.Request) -> bool:
    connection = request.headers.get("Connection", "").lower()
    return request.headers.get("Upgrade", "").lower() == "websocket" and "upgrade" in connection


_SUCCESS: Obj = {"metadata": {}, "status": "Success"}


def _exit_status(code: int) -> Obj:
    # The kubelet reports "command terminated with exit code N"; the translator wraps that once more.
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: command terminated with exit code {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


class _ApiView:
    """What the simulated kubelet reads, straight from the API server's store."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api

    def get(self, res: Resource, namespace: str, name: str) -> Obj | None:
        try:
            return self.api.get(res, namespace, name)
        except errors.StatusError:
            return None

    def list(self, res: Resource, namespace: str) -> list[Obj]:
        return self.api.list(res, namespace)[0]

    def token(self, pod: Obj, audience: str | None, expiration_seconds: int) -> str | None:
        auth = self.api.auth
        meta, spec = pod["metadata"], pod.get("spec") or {}
        account = self.get(SERVICEACCOUNTS, str(meta.get("namespace")),
                           str(spec.get("serviceAccountName") or "default"))
        if auth is None or account is None:
            return None
        node = self.get(NODES, "", str(spec.get("nodeName") or "")) if spec.get("nodeName") else None
        binding = Binding("Pod", str(meta.get("name")), str(meta.get("uid")),
                          (node["metadata"]["name"], str(node["metadata"].get("uid"))) if node else None)
        return auth.signer.issue(account, [audience] if audience else list(API_AUDIENCES), expiration_seconds,
                                 self.api.clock.now(), binding)


class StreamingServer:
    """The connect subresources of one API server, and the container runtime behind its kubelets."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.runtime = ContainerRuntime(_ApiView(api), api.clock.now)
        self.sessions: set[web.WebSocketResponse] = set()

    async def close_all(self) -> None:
        """The server is stopping: end every open session, as a going-away close."""
        for ws in list(self.sessions):
            with contextlib.suppress(ConnectionResetError):
                await ws.close(code=WSCloseCode.GOING_AWAY)

    async def serve(self, request: web.Request, user: User, namespace: str, name: str,
                    subresource: str) -> web.StreamResponse:
        websocket = _is_websocket(request)
        if request.method == "GET" and websocket:
            assert self.api.auth is not None
            self.api.auth.check_resource(user, "create", "", "pods", subresource, namespace, name)
        pod = self.api.get(PODS, namespace, name)
        opts = _options(request.query)
        container = choose_container(pod, opts.container) if subresource != "portforward" else ""
        if not (pod.get("spec") or {}).get("nodeName"):
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        if not websocket:
            if not spdy_upgrade.is_spdy_upgrade(request):
                raise errors.bad_request("Upgrade request required")
            if subresource != "portforward" and not (opts.stdin or opts.stdout or opts.stderr):
                raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
            return await self._serve_spdy(request, pod, container, opts, subresource)
        if subresource == "portforward":
            offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
            if any(p in portforward.TUNNEL_PROTOCOLS for p in offered):
                return await portforward.serve_tunnel(request, pod, self.sessions)
            ports = portforward.ports_of(request.query)
            return await portforward.serve_channels(request, pod, ports, self.sessions)
        if not (opts.stdin or opts.stdout or opts.stderr):
            raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
        ws = web.WebSocketResponse(protocols=channels.PROTOCOLS, autoping=True, timeout=channels.CLOSE_WAIT)
        await ws.prepare(request)
        self.sessions.add(ws)
        conn = channels.ChannelConnection(ws)
        try:
            status = await self._run(conn, pod, container, opts, subresource)
            await conn.write_status(status)
        finally:
            self.sessions.discard(ws)
            await conn.close()
        return ws

    async def _run(self, conn: channels.ChannelConnection, pod: Obj, container: str, opts: _StreamOptions,
                   subresource: str) -> Obj:
        stdin = shell.Input() if opts.stdin else shell.Input(b"")
        tty = opts.tty

        async def out(data: bytes) -> None:
            if opts.stdout:
                # A terminal's output processing (onlcr) turns each bare newline into CRLF.
                await conn.write(channels.STDOUT, _BARE_NEWLINE.sub(b"\r\n", data) if tty else data)

        async def err(data: bytes) -> None:
            if tty:
                await out(data)  # a terminal has one output stream
            elif opts.stderr:
                await conn.write(channels.STDERR, data)

        closed = False

        def stdin_closed() -> None:
            nonlocal closed
            if not closed:
                closed = True
                stdin.close()

        reader = asyncio.ensure_future(conn.read(stdin.feed, stdin_closed, lambda _w, _h: None))
        work = asyncio.ensure_future(self._work(pod, container, opts, subresource, stdin, out, err))
        try:
            await asyncio.wait([work, reader], return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # the client went away: stop what it started
                work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                return await work
            return _SUCCESS
        finally:
            for task in (work, reader):  # (this handler itself cancelled: nothing it started may outlive it)
                task.cancel()
            await asyncio.gather(work, reader, return_exceptions=True)

    async def _work(self, pod: Obj, container: str, opts: _StreamOptions, subresource: str, stdin: shell.Input,
                    out: shell.Writer, err: shell.Writer, *, translated: bool = True) -> Obj:
        """Run the exec or attach; its outcome as the client reads it: through the API server's stream
        translator (``translated``, the WebSocket path) or straight from the kubelet (SPDY)."""
        try:
            if subresource == "attach":
                await self.runtime.attach(pod, container, stdin if opts.stdin else None, out, err, opts.tty)
                return _SUCCESS
            code = await self.runtime.exec(pod, container, opts.command, stdin, out, err, opts.tty)
        except ContainerNotFound as e:
            return errors.internal_error(f"unable to upgrade connection: {e}").status
        except shell.StartError as e:
            # containerd's failure, wrapped by the kubelet (and again by the stream translator).
            why = f"error executing command in container: {e}"
            return errors.internal_error(f"Internal error occurred: {why}" if translated else why).status
        if code == 0:
            return _SUCCESS
        if translated:
            return _exit_status(code)
        # containerd's CodeExitError, as the kubelet words it.
        status = _exit_status(code)
        status["message"] = (f"command terminated with non-zero exit code: error executing command "
                             f"[{' '.join(opts.command)}], exit code {code}")
        return status

    async def _serve_spdy(self, request: web.Request, pod: Obj, container: str, opts: _StreamOptions,
                          subresource: str) -> web.StreamResponse:
        """The request proxied to the kubelet as a SPDY upgrade (see :mod:`spdy_upgrade`)."""
        if subresource == "portforward":
            protocol = spdy_upgrade.negotiate(request, spdy_upgrade.PORT_FORWARD_PROTOCOLS)
            response, conn = await spdy_upgrade.upgrade(request, protocol)
            await portforward.serve_spdy(conn, pod)
            return response
        try:
            self.runtime.container(pod, container)
        except ContainerNotFound as e:  # the kubelet's plain-text answer, passed on by the proxy
            return web.Response(status=500, text=str(e))
        protocol = spdy_upgrade.negotiate(request, spdy_upgrade.EXEC_PROTOCOLS)
        response, conn = await spdy_upgrade.upgrade(request, protocol)

        async def work(stdin: shell.Input, out: shell.Writer, err: shell.Writer) -> Obj:
            return await self._work(pod, container, opts, subresource, stdin, out, err, translated=False)

        await spdy_upgrade.run_remote_command(conn, protocol, opts.stdin, opts.stdout, opts.stderr, opts.tty, work)
        return response
