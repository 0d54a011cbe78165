"""running queries: the legs of a statement over several data sources, for every worker

Revision ID: 0012_running_legs
Revises: 0011_views
Create Date: 2026-11-26 21:45:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0012_running_legs"
down_revision = "0011_views"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("running_queries") as batch:
        batch.add_column(sa.Column("legs", sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table("running_queries") as batch:
        batch.drop_column("legs")
