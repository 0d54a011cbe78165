"""data sources created at run time (CREATE DATABASE, /api/databases)

Revision ID: 0004_data_sources
Revises: 0003_row_versions
Create Date: 2026-11-23 10:00:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0004_data_sources"
down_revision = "0003_row_versions"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "data_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("secrets", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row_version", sa.Integer(), server_default="1", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_data_sources")),
        sa.UniqueConstraint("name_key", name=op.f("uq_data_sources_name_key")),
        sqlite_autoincrement=True,
    )


def downgrade():
    op.drop_table("data_sources")
