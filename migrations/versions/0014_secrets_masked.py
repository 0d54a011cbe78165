"""secrets: agents' secrets encrypted apart; statement texts kept masked

Revision ID: 0014_secrets_masked
Revises: 0013_catalog_versions
Create Date: 2026-11-27 10:00:00

Agents, skills and agents' skill links get a ``secrets`` column (a Fernet token under
QUARRY_ENCRYPTION_KEY): the secrets their params (an agent's model and data, a link's
parameters) held in clear move there, the mask taking their place. Without a key at migration time they cannot be kept encrypted, so they
are removed (each named in a warning: give it its key again; an agent may use
QUARRY_LLM_API_KEY), never kept in clear.

The statements of the audit log, of the statement histories and of the running statements
are masked as new ones are (``app/mindsdb/masking.py``), and so are the histories' error
messages. Only texts that may name a secret are read back and rewritten.
"""
import json
import logging

import sqlalchemy as sa
from alembic import op

revision = "0014_secrets_masked"
down_revision = "0013_catalog_versions"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def upgrade():
    for table in ("agents", "skills", "agent_skills"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("secrets", sa.Text(), nullable=True))
    conn = op.get_bind()
    _seal(conn, "agents", ("id",), ("params", "model", "data"))
    _seal(conn, "skills", ("id",), ("params",))
    _seal(conn, "agent_skills", ("agent_id", "skill_id"), ("parameters",))
    _mask_statements(conn)


def _seal(conn, table, keys, fields):
    from app.rules.secrets import take_secrets
    from app.services.credentials import current_keyring

    keyring = current_keyring()
    records = sa.table(table, *(sa.column(k) for k in keys),
                       *(sa.column(f, sa.JSON) for f in fields), sa.column("secrets"))
    for row in conn.execute(sa.select(records)).all():
        which = {k: getattr(row, k) for k in keys}
        masked, taken = {}, {}
        for field in fields:
            masked[field], found = take_secrets(getattr(row, field))
            if found:
                taken[field] = found
        if not taken:
            continue
        if keyring is None:
            log.warning("%s %s had secrets in clear and QUARRY_ENCRYPTION_KEY is not set: "
                        "they were removed; give it its key again", table, which)
            for field, found in taken.items():
                for path, _ in found:
                    _remove(masked[field], path)
            token = None
        else:
            token = keyring.encrypt(json.dumps(taken))
        conn.execute(records.update().where(*(records.c[k] == v for k, v in which.items()))
                     .values(**masked, secrets=token))


def _remove(value, path):
    for step in path[:-1]:
        value = value[step]
    del value[path[-1]]


def _mask_statements(conn):
    from app.mindsdb.masking import mask_statement
    from app.rules.secrets import SECRET_MARKERS

    for table, columns in (("audit", ("statement",)),
                           ("console_history", ("statement", "error_message")),
                           ("running_queries", ("statement",))):
        rows = sa.table(table, sa.column("id"), *(sa.column(c) for c in columns))
        # Only rows that may name a secret are read back.
        maybe = sa.or_(*(sa.func.lower(rows.c[c]).contains(marker)
                         for c in columns for marker in SECRET_MARKERS))
        for row in conn.execute(sa.select(rows).where(maybe)).all():
            if row.statement is None:
                continue
            masked = mask_statement(row.statement)
            values = {"statement": masked.text}
            if "error_message" in columns and row.error_message is not None:
                values["error_message"] = masked.scrub(row.error_message)
            if any(getattr(row, c) != v for c, v in values.items()):
                conn.execute(rows.update().where(rows.c.id == row.id).values(**values))


def downgrade():
    # The masked texts stay masked, and the encrypted secrets go with their column: there is
    # no copy in clear to put back.
    for table in ("agent_skills", "skills", "agents"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("secrets")
