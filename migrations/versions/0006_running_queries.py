"""running queries: the statements running now, so any worker can list and cancel them

Revision ID: 0006_running_queries
Revises: 0004_data_sources
Create Date: 2026-11-23 10:00:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0006_running_queries"
down_revision = "0004_data_sources"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "running_queries",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("user_name", sa.String(length=63), nullable=True),
        sa.Column("source", sa.String(length=63), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("response_format", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rows_sent", sa.BigInteger(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("backend_id", sa.String(length=32), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_running_queries")),
    )
    op.create_index("ix_running_queries_owner", "running_queries", ["host", "pid"], unique=False)


def downgrade():
    op.drop_index("ix_running_queries_owner", table_name="running_queries")
    op.drop_table("running_queries")
