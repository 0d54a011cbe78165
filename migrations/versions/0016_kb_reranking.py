"""knowledge bases: a reranking model (an allow-listed rerank endpoint) and its encrypted key

Revision ID: 0016_kb_reranking
Revises: 0015_knowledge_bases
Create Date: 2026-11-27 13:40:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0016_kb_reranking"
down_revision = "0015_knowledge_bases"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("knowledge_bases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reranking", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("reranking_api_key", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("knowledge_bases", schema=None) as batch_op:
        batch_op.drop_column("reranking_api_key")
        batch_op.drop_column("reranking")
