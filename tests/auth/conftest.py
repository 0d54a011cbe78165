"""Fixtures for the sign-in tests: an app with auth on, users, and signing in."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from flask import Flask

from app.services import auth as auth_service

SECRET_KEY = "test-secret-key-" + "x" * 32
PASSWORD = "correct horse battery"


@pytest.fixture
def make_auth_app(make_app) -> Callable[..., Flask]:
    """``make_auth_app(**config)``: an app with sign-in required, on this test's store."""

    def build(**config) -> Flask:
        settings = {"AUTH_REQUIRED": True, "SECRET_KEY": SECRET_KEY, "DEMO_SOURCE": False}
        settings.update(config)
        return make_app(**settings)

    return build


@pytest.fixture
def auth_app(make_auth_app) -> Flask:
    return make_auth_app()


@pytest.fixture
def auth_client(auth_app):
    return auth_app.test_client()


def add_user(app: Flask, name: str = "alice", password: str = PASSWORD) -> None:
    with app.app_context():
        auth_service.create_user(name, password)


def add_token(app: Flask, user: str = "alice", label: str = "ci") -> str:
    with app.app_context():
        return auth_service.create_token(user, label)[1]


def sign_in(client, name: str = "alice", password: str = PASSWORD, **kwargs):
    return client.post("/api/login", json={"username": name, "password": password}, **kwargs)


@pytest.fixture
def alice(auth_app) -> str:
    """User alice exists on the auth app; her password is PASSWORD."""
    add_user(auth_app)
    return "alice"
