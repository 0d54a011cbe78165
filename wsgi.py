"""WSGI entry point: ``gunicorn wsgi:app``; Celery workers: ``celery -A wsgi:celery worker``."""

from typing import Any

from app import create_app

app = create_app()


def __getattr__(name: str) -> Any:
    # ``wsgi.celery`` is made when asked for (by ``celery -A wsgi:celery``), so that a web
    # server without a broker never imports Celery.
    if name == "celery":
        from app.tasks import celery_for

        return celery_for(app)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
