"""row versions on skills and agents: concurrent merges never lose a write

Revision ID: 0003_row_versions
Revises: 0002_auth
Create Date: 2026-11-22 00:45:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0003_row_versions"
down_revision = "0002_auth"
branch_labels = None
depends_on = None

TABLES = ("skills", "agents")


def upgrade():
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("row_version", sa.Integer(), server_default="1",
                                          nullable=False))


def downgrade():
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("row_version")
