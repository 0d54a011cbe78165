"""The migrations build exactly the schema the mapped classes describe, on SQLite and PostgreSQL."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade
from sqlalchemy import create_engine, inspect, text

from app import create_app
from app.extensions import db
from tests.conftest import pg_database


def _diff(url: str) -> list:
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    engine.dispose()
    return diff


def _upgrade_then_check(url: str, instance: str) -> None:
    app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": instance, "DEMO_SOURCE": False})
    with app.app_context():
        upgrade()
        assert _diff(url) == []
        tables = set(inspect(db.engine).get_table_names())
        assert {t.name for t in db.metadata.sorted_tables} <= tables
        with db.engine.connect() as conn:
            names = conn.execute(text("SELECT name FROM projects")).scalars().all()
        assert names == ["mindsdb"]
        downgrade(revision="base")
        assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
        upgrade()
        assert _diff(url) == []
        db.engine.dispose()


def test_migrations_on_empty_sqlite(tmp_path):
    _upgrade_then_check(f"sqlite:///{tmp_path}/empty.db", str(tmp_path))


@pytest.mark.parametrize("run", ["postgresql"])
def test_migrations_on_empty_postgresql(tmp_path, run):
    with pg_database("quarry_migrate") as url:
        _upgrade_then_check(url, str(tmp_path))
