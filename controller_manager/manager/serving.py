"""The secure endpoint: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz`` over HTTPS on ``--secure-port``.

Guarantees:
- Every request passes :class:`~controller_manager.manager.auth.DelegatingAuth` first (401/403 with the
  apiserver's Status body), except the ``--authorization-always-allow-paths``.
- ``/metrics`` is the Prometheus text of the process's default registry (``generate_latest``).
- ``/healthz``, ``/livez``, ``/readyz`` render their check groups as the apiserver does (see
  :mod:`controller_manager.manager.health`); ``/healthz/<check>`` (and ``/livez/<check>``,
  ``/readyz/<check>``) answer one check: ``ok`` or 500 ``internal server error: <reason>``.
- ``/readyz`` says whether this instance leads or stands by (a ``leader-election`` line, and
  ``ok: leader`` / ``ok: standby`` as its short answer).
- The server owns no task: aiohttp's runner serves on the event loop; :meth:`SecureServer.stop` closes the
  listener and in-flight requests.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from controller_manager.manager.auth import Decision, DelegatingAuth
from controller_manager.manager.health import HealthChecks, render, run_check

_TEXT = "text/plain; charset=utf-8"
_GROUPS = ("healthz", "livez", "readyz")
LEADER_CHECK = "leader-election"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _text(body: str, status: int = 200) -> web.Response:
    resp = web.Response(text=body, status=status, content_type="text/plain", charset="utf-8")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def _status(decision: Decision) -> web.Response:
    return web.Response(body=orjson.dumps(decision.body), status=decision.status, content_type="application/json")


class SecureServer:
    """HTTPS serving of metrics and health, behind delegated auth."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        auth: DelegatingAuth | None,
        checks: HealthChecks,
        role: Callable[[], str] | None = None,
        logger: Any = None,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._auth = auth
        self.checks = checks
        self._role = role
        self._log = logger
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # the bound port once started (useful with port 0 in tests)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth_middleware])
        app.router.add_get("/metrics", self._metrics)
        for group in _GROUPS:
            app.router.add_get(f"/{group}", self._group_handler(group))
            app.router.add_get(f"/{group}/{{check}}", self._check_handler(group))
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port, ssl_context=self._ssl, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        addresses = runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._auth is None:
            return await handler(request)
        decision = await self._auth.decide(request.method, request.path, request.headers.get("Authorization"))
        if not decision.allowed:
            if self._log is not None:
                self._log.debug("request refused", path=request.path, method=request.method, code=decision.status)
            return _status(decision)
        return await handler(request)

    async def _metrics(self, request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(REGISTRY))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    def _group_handler(self, group: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            checks = dict(self.checks.group(group))
            notes: dict[str, str] = {}
            role = self._role() if self._role is not None and group == "readyz" else None
            if role is not None:
                checks[LEADER_CHECK] = _always_ok
                notes[LEADER_CHECK] = role
            report = render(
                group,
                checks,
                verbose="verbose" in request.query,
                exclude=request.query.getall("exclude", []),
                notes=notes,
            )
            if not report.ok:
                if self._log is not None:
                    self._log.warning(f"{group} check failed", failures=report.failures)
                return _text(report.body, 500)
            body = report.body
            if role is not None and body == "ok":
                body = f"ok: {role}"
            return _text(body)

        return handle

    def _check_handler(self, group: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            name = request.match_info["check"]
            check = self.checks.group(group).get(name)
            if check is None:
                if name == LEADER_CHECK and group == "readyz" and self._role is not None:
                    return _text(f"ok: {self._role()}")
                return _text("404 page not found\n", 404)
            reason = run_check(check)
            if reason is not None:
                if self._log is not None:
                    self._log.warning(f"{group} check failed", check=name, reason=reason)
                return _text(f"internal server error: {reason}\n", 500)
            return _text("ok")

        return handle


def _always_ok() -> str | None:
    return None
