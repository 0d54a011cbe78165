"""catalog versions: a stamp per kind of object that processes build in memory

A row per kind (today "data_sources"), its version a random stamp written in the same
transaction as every change of that kind; each request reads it and rebuilds what its
process holds only when it moved. No row yet means no change since the store was made.

Revision ID: 0013_catalog_versions
Revises: 0012_running_legs
Create Date: 2026-11-27 09:45:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0013_catalog_versions"
down_revision = "0012_running_legs"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "catalog_versions",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("version", sa.String(32), nullable=False),
    )


def downgrade():
    op.drop_table("catalog_versions")
