"""The sign-in guard (who is calling; anonymous callers refused when auth is on) and the
check that refuses changes a page on another origin makes a browser send.

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

Cross-origin changes: a browser sends the session cookie with any request to Quarry, also one
that a page on another origin starts (a ``fetch`` with credentials, an auto-submitted form).
So a change (POST, PUT, PATCH, DELETE) is refused with 403, whoever signs it, when the browser
says it comes from elsewhere: its ``Sec-Fetch-Site`` header (sent by every current browser, and
not settable by a page) is neither ``same-origin`` nor ``none`` (typed in, a bookmark); or,
from an older browser without that header, its ``Origin`` is not Quarry's own scheme://host
as the trusted proxy reports it (ProxyFix). A request with neither header does not come from
a browser (curl, requests, mindsdb_sdk) and goes on to sign-in as usual, so a program may sign
in with the cookie just as with a token. Origins listed in QUARRY_TRUSTED_ORIGINS may make
changes from across origins. The check holds with sign-in off too: a page must not drop the
projects of an open Quarry on the user's own machine either. The cookie itself stays
HttpOnly and SameSite=Lax (another site's requests do not carry it at all, but another port of
the same host is the same site: that is what the origin check is for).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, request
from itsdangerous import BadSignature, Signer

from .errors import Forbidden, Unauthorized
from .services import access
from .services import auth as auth_service
from .services.auth import Grant, Principal

COOKIE_NAME = "session"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Sec-Fetch-Site values of a request the page's own origin (or the user, by typing the
# address) started; same-site is not enough: another port or subdomain is the same site.
_OWN_FETCH_SITES = frozenset({"same-origin", "none"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_TRUSTED_KEY = "quarry.trusted_origins"
_ECHOED = 200  # characters of a refused header repeated in the answer: enough to recognise
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
    """Register the cross-origin check and the guard. Call after the request-id hook so that
    403s and 401s carry an id too."""
    app.extensions[_TRUSTED_KEY] = trusted_origins(app.config["TRUSTED_ORIGINS"])
    app.before_request(_refuse_cross_origin)
    app.before_request(_guard)


def trusted_origins(text: str) -> frozenset[str]:
    """The origins of QUARRY_TRUSTED_ORIGINS (comma-separated), normalised; a malformed one
    stops the start, since ignoring it would refuse the very page the operator meant."""
    origins = set()
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        origin = normal_origin(item.removesuffix("/"))
        if origin is None:
            raise RuntimeError(f"QUARRY_TRUSTED_ORIGINS: {item!r} is not an origin; write "
                               "scheme://host or scheme://host:port (no path), e.g. "
                               "https://dashboard.example.com")
        origins.add(origin)
    return frozenset(origins)


def normal_origin(text: str) -> str | None:
    """``scheme://host[:port]`` in lower case without the scheme's default port, or None when
    ``text`` is no http(s) origin (``null``, a path, user info, a bad port)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if (scheme not in _DEFAULT_PORTS or not host or parts.path or parts.query or parts.fragment
            or parts.username is not None or parts.password is not None):
        return None
    if ":" in host:
        host = f"[{host}]"  # IPv6, bracketed as in a URL
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else \
        f"{scheme}://{host}:{port}"


def _refuse_cross_origin() -> None:
    """403 for a change a browser makes on behalf of a page on another origin."""
    if request.method in _SAFE_METHODS:
        return
    origin = request.headers.get("Origin")
    claimed = normal_origin(origin) if origin is not None else None
    if claimed is not None and claimed in current_app.extensions[_TRUSTED_KEY]:
        return
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        if fetch_site.strip().lower() in _OWN_FETCH_SITES:
            return
        reason = (f"the browser says a page elsewhere started it "
                  f"(Sec-Fetch-Site: {fetch_site[:_ECHOED]})")
    elif origin is None:
        return  # neither header: not a browser, so no page can have started it
    else:
        # request.scheme and request.host are what the trusted proxy reported (ProxyFix).
        own = f"{request.scheme}://{request.host}"
        if claimed is not None and claimed == normal_origin(own):
            return
        reason = (f"a page of another origin started it (Origin: {origin[:_ECHOED]}; "
                  f"Quarry is {own})")
    raise Forbidden(f"A change ({request.method}) is refused when {reason}: a page must not "
                    "act with the session of a user who visits it. Programs send neither "
                    "header; an operator may allow an origin with QUARRY_TRUSTED_ORIGINS",
                    title="Cross-origin request refused")


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
    """The tokens the request carries, headers first, then the cookie's."""
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
