"""The sign-in guard: who is calling, and refusing anonymous callers when auth is on.

A caller proves who it is with one of (any valid one is enough):
- the ``session`` cookie set by POST /api/login (the session token, signed with SECRET_KEY),
- ``Authorization: Bearer <token>`` (a session token or an API token; mindsdb_sdk's way),
- ``X-Api-Key: <token>`` (what mindsdb_sdk sends when given ``api_key``).

With AUTH_REQUIRED on, every route refuses an anonymous caller with 401, except the views
marked ``@public`` (GET /api/status, POST /api/login and the liveness probe
GET /api/util/ping, which reveals nothing). The guard is one ``before_request``
hook on the app, so a route added later is guarded without doing anything. The OpenAPI
document (/api/openapi.json) is guarded too: it describes the service to signed-in users only.
A path that matches no route answers 404/405 as usual: mindsdb_sdk probes /cloud/login first
and signs in at /api/login only after a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, Response, current_app, g, request
from itsdangerous import BadSignature, Signer

from .errors import Unauthorized
from .services import auth as auth_service
from .services.auth import Grant, Principal

COOKIE_NAME = "session"
_COOKIE_SALT = "quarry.session-cookie"
F = TypeVar("F", bound=Callable[..., Any])


def public(view: F) -> F:
    """Mark a view as open to anonymous callers even when auth is required."""
    view.quarry_public = True  # type: ignore[attr-defined]
    return view


def init_auth(app: Flask) -> None:
    """Register the guard. Call after the request-id hook so that 401s carry an id too."""
    app.before_request(_guard)


def current_principal() -> Principal | None:
    """The signed-in caller of this request, or None."""
    if "quarry_principal" not in g:
        g.quarry_principal = _identify()
    return g.quarry_principal


def auth_status() -> dict[str, bool]:
    """The ``auth`` object of GET /api/status."""
    return {"required": bool(current_app.config["AUTH_REQUIRED"]),
            "signed_in": current_principal() is not None}


def set_session_cookie(response: Response, grant: Grant) -> Response:
    """Give the browser its session: HttpOnly, SameSite=Lax, Secure when the request was
    HTTPS (as the trusted proxy reports it through ProxyFix)."""
    response.set_cookie(COOKIE_NAME, _signer().sign(grant.token).decode(),
                        max_age=current_app.config["SESSION_TTL_S"], expires=grant.expires_at,
                        path="/", secure=request.is_secure, httponly=True, samesite="Lax")
    return response


def clear_session_cookie(response: Response) -> Response:
    response.delete_cookie(COOKIE_NAME, path="/", secure=request.is_secure, httponly=True,
                           samesite="Lax")
    return response


def _signer() -> Signer:
    return Signer(current_app.config["SECRET_KEY"], salt=_COOKIE_SALT)


def _presented_tokens() -> list[str]:
    tokens = []
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        tokens.append(value.strip())
    if api_key := request.headers.get("X-Api-Key", "").strip():
        tokens.append(api_key)
    if cookie := request.cookies.get(COOKIE_NAME):
        try:
            tokens.append(_signer().unsign(cookie).decode())
        except BadSignature:
            pass  # forged or signed with an older key: anonymous
    return tokens


def _identify() -> Principal | None:
    for token in _presented_tokens():
        if (principal := auth_service.authenticate(token)) is not None:
            return principal
    return None


def _is_public() -> bool:
    view = current_app.view_functions.get(request.endpoint or "")
    if view is None:
        return False
    if getattr(view, "quarry_public", False):
        return True
    # A MethodView: the mark is on the method's handler.
    handler = getattr(getattr(view, "view_class", None), request.method.lower(), None)
    return bool(getattr(handler, "quarry_public", False))


def _guard() -> None:
    if not current_app.config["AUTH_REQUIRED"]:
        return
    if request.url_rule is None:
        return  # no such route: let routing answer 404/405
    if _is_public() or current_principal() is not None:
        return
    raise Unauthorized("Authorization is required to complete the request")
