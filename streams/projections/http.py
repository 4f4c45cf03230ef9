"""The runner's HTTP endpoint (GET only): each projection's lag, and ``/metrics``.

``GET /projections`` lists them; ``GET /projections/<id>`` gives one (400 for an id that
cannot be one, 404 for one this runner does not run, 503 while its storage is unavailable:
restoring, or its last poll failed); ``GET /metrics`` is the Prometheus text format. Any
other method is 405.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams.projections.api import valid_id
from streams.projections.lag import ProjectionLag
from streams.projections.metrics import RunnerMetrics

log = logging.getLogger(__name__)

LagOf = Callable[[], ProjectionLag | None]  # None: storage unavailable


class HealthServer:
    def __init__(
        self, lags: Mapping[str, LagOf], metrics: RunnerMetrics, host: str, port: int
    ) -> None:
        self.lags, self.metrics = lags, metrics
        self.server = ThreadingHTTPServer((host, port), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        log.info("projection lag and metrics at http://%s:%d", *self.server.server_address[:2])
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                log.debug(format, *args)

            def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, status: HTTPStatus, data: Any) -> None:
                self._send(status, json.dumps(data).encode(), "application/json")

            def _error(self, status: HTTPStatus, code: str, message: str) -> None:
                self._json(status, {"error": {"code": code, "message": message}})

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                if path == "/metrics":
                    self._send(
                        HTTPStatus.OK, generate_latest(owner.metrics.registry), CONTENT_TYPE_LATEST
                    )
                elif path == "/projections":
                    lags = [lag() for lag in owner.lags.values()]
                    self._json(HTTPStatus.OK, [x.model_dump() for x in lags if x is not None])
                elif path.startswith("/projections/"):
                    self._one(unquote(path.removeprefix("/projections/")))
                else:
                    self._error(HTTPStatus.NOT_FOUND, "not_found", f"no resource {path}")

            def _one(self, projection_id: str) -> None:
                if not valid_id(projection_id):
                    self._error(
                        HTTPStatus.BAD_REQUEST, "invalid_projection_id", "not a projection id"
                    )
                elif (lag_of := owner.lags.get(projection_id)) is None:
                    self._error(
                        HTTPStatus.NOT_FOUND, "unknown_projection", f"no {projection_id} here"
                    )
                elif (lag := lag_of()) is None:
                    self._error(
                        HTTPStatus.SERVICE_UNAVAILABLE,
                        "projection_unavailable",
                        f"{projection_id}: its storage is unavailable (restoring, or failing)",
                    )
                else:
                    owner.metrics.lagging(lag)
                    self._json(HTTPStatus.OK, lag.model_dump())

            def _refuse(self) -> None:
                self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
                self.send_header("Allow", "GET")
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _refuse

        return Handler
