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

Cross-site request forgery: a browser sends the session cookie with any request to Quarry,
also one a hostile page starts. A change (POST, PUT, PATCH, DELETE) that is signed in by the
cookie alone must therefore carry the header ``X-Quarry-CSRF: 1`` (the console sends it). A
page on another origin cannot add a custom header without a CORS preflight, which Quarry
never grants. Bearer and X-Api-Key callers (programs, mindsdb_sdk, which sends Bearer after
signing in) are not affected: a browser never adds those headers by itself.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, Response, current_app, g, request
from itsdangerous import BadSignature, Signer

from .errors import Forbidden, Unauthorized
from .services import access
from .services import auth as auth_service
from .services.auth import Grant, Principal

COOKIE_NAME = "session"
CSRF_HEADER = "X-Quarry-CSRF"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_COOKIE_SALT = "quarry.session-cookie"
F = TypeVar("F", bound=Callable[..., Any])


def public(view: F) -> F:
    """Mark a view as open to anonymous callers even when auth is required."""
    view.quarry_public = True  # type: ignore[attr-defined]
    return view


def operators_only(view: F) -> F:
    """Mark a probe (readiness, /metrics): open to the addresses of QUARRY_METRICS_ALLOW
    without sign-in, from elsewhere only to a signed-in admin (403 otherwise)."""
    view.quarry_public = True  # type: ignore[attr-defined]
    view.quarry_operators = True  # type: ignore[attr-defined]
    return view


def require_admin() -> None:
    """403 unless the caller is a signed-in admin (or checks are off: sign-in not required)."""
    actor = access.current_actor()
    if current_app.config["AUTH_REQUIRED"] and (actor is None or not actor.admin):
        raise Forbidden("Only an admin may do this", title="Admin only")


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


def _presented_tokens() -> list[tuple[str, bool]]:
    """The tokens the request carries, headers first, each with whether it came by cookie."""
    tokens = []
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        tokens.append((value.strip(), False))
    if api_key := request.headers.get("X-Api-Key", "").strip():
        tokens.append((api_key, False))
    if cookie := request.cookies.get(COOKIE_NAME):
        try:
            tokens.append((_signer().unsign(cookie).decode(), True))
        except BadSignature:
            pass  # forged or signed with an older key: anonymous
    return tokens


def _identify() -> Principal | None:
    for token, by_cookie in _presented_tokens():
        if (principal := auth_service.authenticate(token)) is not None:
            if by_cookie and not _csrf_checked():
                g.quarry_csrf_refused = True
                return None
            return principal
    return None


def _csrf_checked() -> bool:
    """Whether a cookie may sign this request in: a read, or a change with the header."""
    return request.method in _SAFE_METHODS or request.headers.get(CSRF_HEADER) == "1"


def _is_public() -> bool:
    return _marked("quarry_public")


def _marked(mark: str) -> bool:
    view = current_app.view_functions.get(request.endpoint or "")
    if view is None:
        return False
    if getattr(view, mark, False):
        return True
    # A MethodView: the mark is on the method's handler.
    handler = getattr(getattr(view, "view_class", None), request.method.lower(), None)
    return bool(getattr(handler, mark, False))


def _guard() -> None:
    if _marked("quarry_operators"):
        _guard_probe()
        return
    if not current_app.config["AUTH_REQUIRED"]:
        return
    if request.url_rule is None:
        return  # no such route: let routing answer 404/405
    principal = current_principal()
    if principal is not None:
        # Rights are read with the credential on every request: nothing outlives a revoke.
        access.set_actor(access.Actor(principal.user_id, principal.user_name,
                                      principal.role == "admin", principal.project_key,
                                      principal.read_only, principal.sources))
        return
    if _is_public():
        return
    if g.get("quarry_csrf_refused"):
        raise Forbidden(f"A change signed in by the session cookie must carry the header "
                        f"{CSRF_HEADER}: 1 (the console sends it); programs sign in with "
                        f"Authorization: Bearer or X-Api-Key", title="Cross-site request refused")
    raise Unauthorized("Authorization is required to complete the request")


def _guard_probe() -> None:
    if client_allowed(request.remote_addr, current_app.config["METRICS_ALLOW"]):
        return
    principal = current_principal() if current_app.config["AUTH_REQUIRED"] else None
    if principal is not None and principal.role == "admin":
        return
    raise Forbidden(f"{request.path} is open to the addresses of QUARRY_METRICS_ALLOW and to "
                    "signed-in admins", title="Not an allowed address")


def client_allowed(address: str | None, allow: str) -> bool:
    """Whether ``address`` (as ProxyFix reports the client) is in the comma-separated list of
    addresses and networks ``allow``."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for item in (a.strip() for a in allow.split(",")):
        if not item:
            continue
        try:
            if ip in ipaddress.ip_network(item, strict=False):
                return True
        except ValueError:
            continue  # a bad entry is skipped, not a reason to open everything
    return False
