"""the console: statement history per user, saved queries per project

Revision ID: 0008_console
Revises: 0004_data_sources
Create Date: 2026-11-23 12:00:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0008_console"
# The lead re-chains this after 0007_model_versions at merge time.
down_revision = "0006_running_queries"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "console_history",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_key", sa.String(length=63), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("database", sa.String(length=63), nullable=True),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("row_count", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error_code", sa.Integer(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_history")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_console_history_user_ran", "console_history", ["user_key", "ran_at"])
    op.create_table(
        "saved_queries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("database", sa.String(length=63), nullable=True),
        sa.Column("created_by", sa.String(length=63), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"],
                                name=op.f("fk_saved_queries_project_id_projects"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saved_queries")),
        sa.UniqueConstraint("project_id", "name_key",
                            name=op.f("uq_saved_queries_project_id_name_key")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_saved_queries_project_id"), "saved_queries", ["project_id"])


def downgrade():
    op.drop_index(op.f("ix_saved_queries_project_id"), table_name="saved_queries")
    op.drop_table("saved_queries")
    op.drop_index("ix_console_history_user_ran", table_name="console_history")
    op.drop_table("console_history")
