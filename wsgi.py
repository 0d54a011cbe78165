"""WSGI entry point: ``gunicorn wsgi:app``; Celery workers: ``celery -A wsgi:celery worker``."""

from app import create_app

app = create_app()
celery = app.extensions.get("quarry.celery") or app.extensions["quarry.celery_app"]
