"""Running behind a reverse proxy: trusted forwarded headers, request ids, safe logs."""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid

from flask import Flask, Response, g, has_request_context, request
from flask.logging import default_handler
from werkzeug.middleware.proxy_fix import ProxyFix

from .rules.secrets import MASK, is_secret_key
from .telemetry import current_metrics

REQUEST_ID_HEADER = "X-Request-ID"
# A client's id is kept only when it is short and plain, so it cannot forge log lines.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:+=/-]{1,128}")
LOG_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"

# Defence in depth: nothing should log a secret, but if a message ever carries one, the
# handler masks it. Tokens are recognisable by their prefix (qs_/qt_), the rest by context.
_REDACTIONS = [
    (re.compile(r"\bq[st]_[A-Za-z0-9_-]{16,}"), "q*_********"),
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic)?\s*)[^\s\"',;]+"),
     r"\1********"),
    (re.compile(r"(://[^:/@\s]+:)[^@\s]+@"), r"\1********@"),  # passwords in URLs
]
# name = value, name: "value": masked when the name is secret (the one list of secret names,
# ``rules.secrets``) or an HTTP header that carries a session.
_NAMED_VALUE = re.compile(r"([A-Za-z0-9_.-]+)([\"']?\s*[:=]\s*[\"']?)([^\s\"',;}]+)")
_SESSION_NAMES = ("cookie", "set-cookie", "session")


def _named(match: re.Match[str]) -> str:
    name = match.group(1)
    if name.lower() in _SESSION_NAMES or is_secret_key(name):
        return match.group(1) + match.group(2) + MASK
    return match.group(0)


def redact(text: str) -> str:
    """The text with anything that looks like a secret masked."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return _NAMED_VALUE.sub(_named, text)


class RequestIdFilter(logging.Filter):
    """Gives every record a ``request_id`` ("-" outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = "-"
        if has_request_context():
            request_id = g.get("request_id", "-")
        record.request_id = request_id
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (as logging's own
    last-resort handler does), so a replaced stderr (gunicorn, test capture) is followed."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def init_ops(app: Flask) -> None:
    """ProxyFix for the configured hops, the request id, and the log handler."""
    hops = app.config["PROXY_HOPS"]
    if hops:
        # Only as many X-Forwarded-* values as there are proxies we run are believed; with 0
        # (no proxy) a client cannot pretend to be HTTPS or another address.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops,
                                x_port=hops, x_prefix=hops)
    app.before_request(_assign_request_id)
    app.after_request(_echo_request_id)
    app.after_request(_count_request)
    _install_log_handler(app)


def _assign_request_id() -> None:
    g.request_started = time.perf_counter()
    given = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = given if _SANE_REQUEST_ID.fullmatch(given) else uuid.uuid4().hex


def _count_request(response: Response) -> Response:
    # By route pattern, never the raw path: one series per route, not per project name.
    route = request.url_rule.rule if request.url_rule is not None else "(no route)"
    metrics = current_metrics()
    metrics.series(metrics.requests, route, request.method, str(response.status_code)).inc()
    started = g.get("request_started")
    if started is not None:
        metrics.series(metrics.request_seconds, route, request.method).observe(
            time.perf_counter() - started)
    return response


def _echo_request_id(response: Response) -> Response:
    response.headers[REQUEST_ID_HEADER] = g.get("request_id") or uuid.uuid4().hex
    if response.status_code == 429 and response.mimetype == "application/problem+json":
        # The problem body says when to retry; HTTP clients and proxies read the header.
        retry_after = (response.get_json(silent=True) or {}).get("retry_after")
        if isinstance(retry_after, int):
            response.headers["Retry-After"] = str(retry_after)
    return response


def _install_log_handler(app: Flask) -> None:
    # The "app" logger is both Flask's app.logger and the parent of every module's logger.
    # One handler to stderr (gunicorn's error log), installed once per process however many
    # apps are made (tests make one per test).
    logger = logging.getLogger("app")
    logger.removeHandler(default_handler)  # else every line would be written twice
    if any(getattr(h, "quarry_handler", False) for h in logger.handlers):
        return
    handler = _StderrHandler()
    handler.quarry_handler = True  # type: ignore[attr-defined]
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(RedactingFormatter(LOG_FORMAT))
    logger.addHandler(handler)
