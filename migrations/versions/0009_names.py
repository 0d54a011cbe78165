"""database names: projects and data sources share one name space, guarded by the store

A row per project and per stored data source, keyed by the lower-cased name: the primary key
makes a project and a data source of one name impossible even when two requests (in two
instances) create them at once. Data sources created at run time also keep whether any
signed-in user may query them (public), what a privileged account means for them
(privileged_role) and what the account check found (role_warnings; null: not checked).

Revision ID: 0009_names
Revises: 0007_model_versions
Create Date: 2026-11-23 08:10:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0009_names"
down_revision = "0007_model_versions"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "database_names",
        sa.Column("name_key", sa.String(63), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
    )
    op.execute("INSERT INTO database_names (name_key, kind) "
               "SELECT name_key, 'project' FROM projects")
    op.execute("INSERT INTO database_names (name_key, kind) "
               "SELECT name_key, 'data' FROM data_sources "
               "WHERE name_key NOT IN (SELECT name_key FROM database_names)")
    with op.batch_alter_table("data_sources") as batch_op:
        batch_op.add_column(sa.Column("public", sa.Boolean(), server_default=sa.false(),
                                      nullable=False))
        batch_op.add_column(sa.Column("privileged_role", sa.String(16), server_default="warn",
                                      nullable=False))
        batch_op.add_column(sa.Column("role_warnings", sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table("data_sources") as batch_op:
        batch_op.drop_column("role_warnings")
        batch_op.drop_column("privileged_role")
        batch_op.drop_column("public")
    op.drop_table("database_names")
