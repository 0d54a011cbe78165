"""views: named SELECT statements of a project (CREATE VIEW p.v AS (…)), read as tables

Revision ID: 0011_views
Revises: 0010_files
Create Date: 2026-11-25 19:25:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0011_views"
down_revision = "0010_files"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "sql_views",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("database", sa.String(length=63), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"],
                                name=op.f("fk_sql_views_project_id_projects"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sql_views")),
        sa.UniqueConstraint("project_id", "name_key",
                            name=op.f("uq_sql_views_project_id_name_key")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_sql_views_project_id"), "sql_views", ["project_id"])


def downgrade():
    op.drop_index(op.f("ix_sql_views_project_id"), table_name="sql_views")
    op.drop_table("sql_views")
