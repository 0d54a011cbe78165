"""The web console: one page at / and /console, and its built assets under /console/static.

The page and its assets are open to anonymous callers (the page shows a sign-in form when
sign-in is required; every piece of data comes from the API, which the guard protects). The
front end is built from web/ into static/ and committed, so serving needs no node.

Every console answer carries a strict Content-Security-Policy: scripts, styles, images and
requests only from Quarry itself, no inline script or style, never framed. Data is put
into the page as text (textContent), never as markup.
"""

from __future__ import annotations

import mimetypes
import os

from flask import Blueprint, Flask, Response, request
from werkzeug.security import safe_join

from ..errors import NotFound
from ..security import public

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

blp = Blueprint("console", __name__)


@blp.after_request
def _harden(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@blp.route("/", methods=["GET"])
@blp.route("/console", methods=["GET"])
@public
def show_console() -> Response:
    """The console page (a shell: the script draws it and asks the API for everything)."""
    response = _file("index.html", "text/html", max_age=0)
    response.headers["Cache-Control"] = "no-cache"
    return response


@blp.route("/console/static/<path:filename>", methods=["GET"])
@public
def console_asset(filename: str) -> Response:
    """A built asset: the bundle, its style sheet, the licences of what it bundles.

    The build leaves a gzip copy next to the large files; a browser that accepts gzip gets
    it (a third of the bytes), without compressing on every request.
    """
    mimetype = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    packed = filename + ".gz"
    if "gzip" in request.accept_encodings and _exists(packed):
        response = _file(packed, mimetype, max_age=300)
        response.headers["Content-Encoding"] = "gzip"
    else:
        response = _file(filename, mimetype, max_age=300)
    response.vary.add("Accept-Encoding")
    return response


def _exists(filename: str) -> bool:
    return os.path.isfile(safe_join(STATIC_DIR, filename) or "")


def _file(filename: str, mimetype: str, *, max_age: int) -> Response:
    """A file of static/ as one body (they are small), with an ETag for revalidation."""
    path = safe_join(STATIC_DIR, filename)  # None for a path that leaves static/
    if path is None or not os.path.isfile(path):
        raise NotFound(f"The console has no file '{filename}'")
    with open(path, "rb") as handle:
        response = Response(handle.read(), mimetype=mimetype)
    response.cache_control.max_age = max_age
    response.cache_control.public = True
    response.add_etag()
    return response.make_conditional(request)


def register_console(app: Flask) -> None:
    app.register_blueprint(blp)
