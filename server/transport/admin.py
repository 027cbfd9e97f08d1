"""The admin listener: /metrics, /status and the operator API (/api/...), on a port of its own.

The public port carries only what players and load balancers need (/ws, the page, /lobby,
/healthz, /readyz); what a scraper or an operator asks is served here, on --admin-host (loopback
by default) and --admin-port, so a proxy or a firewall can keep it off the public network.

aiohttp.web serves it: it parses requests and bodies (up to MAX_BODY_BYTES), answers a method a
route does not take with 405 and a malformed request with 400. Every answer closes its
connection: with --workers N sharing this port (SO_REUSEPORT), each scrape is a new connection
that the kernel hands to any worker, and each worker answers /metrics for itself alone, as on
the public port before; the scraper sees the node's workers in turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from server.transport.operator_api import API_PREFIX, MAX_BODY_BYTES, OperatorApi, json_response

__all__ = ["AdminRoutes", "admin_app", "bound_port", "start_admin"]

SHUTDOWN_TIMEOUT_S = 1.0  # on stop, the longest an admin request in flight is waited for


@dataclass(frozen=True, slots=True)
class AdminRoutes:
    """What the admin listener answers with, from its node."""

    status: Callable[[], Awaitable[dict[str, Any]]]  # GET /status
    metrics: Callable[[], bytes]  # GET /metrics: the Prometheus text
    api: OperatorApi  # /api/...
    status_needs_operator: bool = False  # with a secret, /status is for operators only

    async def get_status(self, request: web.Request) -> web.Response:
        if self.status_needs_operator:
            refused = self.api.refusal(request.headers)
            if refused is not None:
                return refused
        report = await self.status()
        # A report with an `error` is what the node knows without its store: 503.
        failed = "error" in report
        return json_response(report, HTTPStatus.SERVICE_UNAVAILABLE if failed else HTTPStatus.OK)

    async def get_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics(), headers={"Content-Type": METRICS_CONTENT_TYPE})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _one_request_per_connection(request: web.Request, handler: Handler) -> Any:
    """Close the connection after each answer, the router's own 404 and 405 included."""
    try:
        response = await handler(request)
    except web.HTTPException as error:
        error.force_close()
        raise
    response.force_close()
    return response


def admin_app(routes: AdminRoutes) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_one_request_per_connection])
    app.router.add_get("/metrics", routes.get_metrics)  # GET and HEAD
    app.router.add_get("/status", routes.get_status)
    # Every method: the operator API answers 404 and 405 itself, in its JSON shape.
    app.router.add_route("*", API_PREFIX + "{route:.*}", routes.api.handle)
    return app


class _ClientErrorsQuiet(logging.LoggerAdapter[logging.Logger]):
    """aiohttp logs a request it cannot parse (a bad Content-Length, ...) with a traceback at
    error level; that is the client's mistake, answered 400: logged at debug level here."""

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        error = kwargs.get("exc_info")
        if isinstance(error, HttpProcessingError) and 400 <= (error.code or 0) < 500:
            self.debug(msg, *args, **kwargs)
            return
        super().exception(msg, *args, **kwargs)


async def start_admin(
    routes: AdminRoutes, host: str, port: int, reuse_port: bool = False
) -> web.AppRunner:
    """Bind and serve the admin listener; the runner's `cleanup()` stops it."""
    runner = web.AppRunner(
        admin_app(routes),
        handle_signals=False,  # the node handles its signals
        access_log=None,  # operator actions are logged by the API; scrapes are not worth a line
        logger=_ClientErrorsQuiet(logging.getLogger("aiohttp.server"), {}),
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        # A body left unread (refused 413 on its Content-Length, ...) is not read either:
        # the connection closes at once instead of draining it for up to 10 s.
        lingering_time=0,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


def bound_port(runner: web.AppRunner) -> int:
    """The port the admin listener is bound to (the one picked, for port 0)."""
    return int(runner.addresses[0][1])
