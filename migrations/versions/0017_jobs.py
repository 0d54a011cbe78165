"""jobs: statements a project runs on a schedule (CREATE JOB), and their runs, one row per
slot (unique: whoever inserts it runs the slot)

Revision ID: 0017_jobs
Revises: 0016_kb_reranking
Create Date: 2026-11-27 13:40:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0017_jobs"
down_revision = "0016_kb_reranking"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("if_query", sa.Text(), nullable=True),
        sa.Column("start_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("every_n", sa.Integer(), nullable=True),
        sa.Column("every_unit", sa.String(length=16), nullable=True),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("creator_id", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.String(length=63), nullable=True),
        sa.Column("creator_scope", sa.String(length=63), nullable=True),
        sa.Column("last_values", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"],
                                name=op.f("fk_jobs_project_id_projects"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("project_id", "name_key", name=op.f("uq_jobs_project_id_name_key")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_jobs_project_id"), "jobs", ["project_id"])
    op.create_index(op.f("ix_jobs_next_run_at"), "jobs", ["next_run_at"])
    op.create_table(
        "job_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("runner", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_runs_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_runs")),
        sa.UniqueConstraint("job_id", "slot_at", name=op.f("uq_job_runs_job_id_slot_at")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_job_runs_job_id_ended_at", "job_runs", ["job_id", "ended_at"])


def downgrade():
    op.drop_index("ix_job_runs_job_id_ended_at", table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_index(op.f("ix_jobs_next_run_at"), table_name="jobs")
    op.drop_index(op.f("ix_jobs_project_id"), table_name="jobs")
    op.drop_table("jobs")
