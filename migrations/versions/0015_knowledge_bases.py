"""knowledge bases: a project's searchable text (CREATE KNOWLEDGE_BASE p.kb); the chunks and
their vectors live in the index file (app/kb/index.py), under the base's uid

Revision ID: 0015_knowledge_bases
Revises: 0014_secrets_masked
Create Date: 2026-11-27 10:15:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0015_knowledge_bases"
down_revision = "0014_secrets_masked"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "knowledge_bases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("uid", sa.String(length=32), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("embedding", sa.JSON(), nullable=False),
        sa.Column("api_key", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"],
                                name=op.f("fk_knowledge_bases_project_id_projects"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_bases")),
        sa.UniqueConstraint("project_id", "name_key",
                            name=op.f("uq_knowledge_bases_project_id_name_key")),
        sa.UniqueConstraint("uid", name=op.f("uq_knowledge_bases_uid")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_knowledge_bases_project_id"), "knowledge_bases", ["project_id"])


def downgrade():
    op.drop_index(op.f("ix_knowledge_bases_project_id"), table_name="knowledge_bases")
    op.drop_table("knowledge_bases")
