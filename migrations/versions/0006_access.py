"""access: user roles, project members, data-source grants, narrowed tokens, the audit log

Existing users become admins (before roles, every user could do everything); users created
afterwards are members unless made admins. Every existing project gets each existing admin
as its owner, so no project is left without one.

Revision ID: 0006_access
Revises: 0008_console
Create Date: 2026-11-23 05:50:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0006_access"
down_revision = "0008_console"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("users") as batch_op:
        batch_op.add_column(sa.Column("role", sa.String(16), server_default="member",
                                      nullable=False))
    op.execute("UPDATE users SET role = 'admin'")
    with op.batch_alter_table("api_tokens") as batch_op:
        batch_op.add_column(sa.Column("project_key", sa.String(63), nullable=True))
        batch_op.add_column(sa.Column("read_only", sa.Boolean(), server_default=sa.false(),
                                      nullable=False))
    op.create_table(
        "project_members",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(),
                  sa.ForeignKey("projects.id", ondelete="CASCADE"), nullable=False),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("project_id", "user_id"),
    )
    op.create_index("ix_project_members_project_id", "project_members", ["project_id"])
    op.create_index("ix_project_members_user_id", "project_members", ["user_id"])
    op.execute("INSERT INTO project_members (project_id, user_id, role, created_at) "
               "SELECT p.id, u.id, 'owner', CURRENT_TIMESTAMP FROM projects p, users u")
    op.create_table(
        "source_grants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("source_key", sa.String(63), nullable=False),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("privilege", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("source_key", "user_id"),
    )
    op.create_index("ix_source_grants_user_id", "source_grants", ["user_id"])
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_name", sa.String(63), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("target", sa.String(255), nullable=True),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("source", sa.String(63), nullable=True),
        sa.Column("statement", sa.Text(), nullable=True),
        sa.Column("row_count", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_at", "audit", ["at"])
    op.create_index("ix_audit_user_id", "audit", ["user_name", "id"])


def downgrade():
    op.drop_index("ix_audit_user_id", table_name="audit")
    op.drop_index("ix_audit_at", table_name="audit")
    op.drop_table("audit")
    op.drop_index("ix_source_grants_user_id", table_name="source_grants")
    op.drop_table("source_grants")
    op.drop_index("ix_project_members_user_id", table_name="project_members")
    op.drop_index("ix_project_members_project_id", table_name="project_members")
    op.drop_table("project_members")
    with op.batch_alter_table("api_tokens") as batch_op:
        batch_op.drop_column("read_only")
        batch_op.drop_column("project_key")
    with op.batch_alter_table("users") as batch_op:
        batch_op.drop_column("role")
