"""The web console: one page at / and /console, and its built assets under /console/static.

The page and its assets are open to anonymous callers (the page shows a sign-in form when
sign-in is required; every piece of data comes from the API, which the guard protects). The
front end is built from web/ into static/ and committed, so serving needs no node.

Every console answer carries a strict Content-Security-Policy: scripts, styles, images and
requests only from Quarry itself, no inline script or style, never framed. Data is put
into the page as text (textContent), never as markup. The one exception the page allows is
the style element CodeMirror writes where a browser cannot give it a constructed style sheet:
it carries the page's nonce, new for every answer (``style-src 'self' 'nonce-…'``).
"""

from __future__ import annotations

import mimetypes
import os
import secrets

from flask import Blueprint, Flask, Response, g, request
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

# Where index.html takes the page's nonce (web/src/editor.js reads it for CodeMirror).
NONCE_MARK = "{{csp_nonce}}"

blp = Blueprint("console", __name__)


def page_policy(nonce: str) -> str:
    """The page's policy: the console's, with ``nonce`` allowed to style."""
    return CONTENT_SECURITY_POLICY.replace("style-src 'self'", f"style-src 'self' 'nonce-{nonce}'")


@blp.after_request
def _harden(response: Response) -> Response:
    nonce = g.get("console_nonce")
    response.headers["Content-Security-Policy"] = (
        page_policy(nonce) if nonce else CONTENT_SECURITY_POLICY)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@blp.route("/", methods=["GET"])
@blp.route("/console", methods=["GET"])
@public
def show_console() -> Response:
    """The console page (a shell: the script draws it and asks the API for everything).

    A nonce only protects while nobody else knows it: each answer gets its own, and the
    page is never stored or revalidated (an old page would carry an old nonce).
    """
    g.console_nonce = secrets.token_urlsafe(18)
    with open(os.path.join(STATIC_DIR, "index.html"), encoding="utf-8") as handle:
        page = handle.read().replace(NONCE_MARK, g.console_nonce)
    response = Response(page, mimetype="text/html")
    response.headers["Cache-Control"] = "no-store"
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
