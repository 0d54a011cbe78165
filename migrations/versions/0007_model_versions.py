"""model versions: training progress, tries, and the version a finetune started from

Revision ID: 0007_model_versions
Revises: 0006_access
Create Date: 2026-11-23 05:50:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0007_model_versions"
down_revision = "0006_access"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("ml_models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("progress", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="0",
                                      nullable=False))
        batch_op.add_column(sa.Column("base_version", sa.Integer(), nullable=True))


def downgrade():
    with op.batch_alter_table("ml_models", schema=None) as batch_op:
        batch_op.drop_column("base_version")
        batch_op.drop_column("attempts")
        batch_op.drop_column("progress")
