"""Sign-in: /api/login and /api/logout (users and API tokens are managed from the CLI)."""

from flask import jsonify, make_response, request

from ..schemas.auth import LoginIn, TokenOut
from ..security import clear_session_cookie, current_principal, public, set_session_cookie
from ..services import auth as service
from .base import Blueprint

blp = Blueprint("auth", __name__, url_prefix="/api", description="Sign-in sessions")


@blp.route("/login", methods=["POST"])
@blp.arguments(LoginIn)
@blp.response(200, TokenOut)
@blp.problems(401, 429)
@public
def login(body):
    """Sign in: answers a session token (usable as Bearer) and sets the session cookie."""
    grant = service.sign_in(body["username"], body["password"], request.remote_addr)
    return set_session_cookie(make_response({"token": grant.token}), grant)


@blp.route("/logout", methods=["POST"])
@blp.response(200)
@blp.doc_response(200, {"type": "string", "enum": [""],
                        "description": 'An empty string, as MindsDB answers'})
def logout():
    """Sign out: ends the caller's session and clears the cookie."""
    service.sign_out(current_principal())
    return clear_session_cookie(jsonify(""))
