from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import InProject, UTCDateTime, utcnow


class Job(InProject, db.Model):
    """A project's job: statements run at the slots of its schedule, as their creator."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    query: Mapped[str] = mapped_column(Text)              # the statements, ';'-separated
    if_query: Mapped[str | None] = mapped_column(Text)    # run them only when it has rows
    start_at: Mapped[datetime] = mapped_column(UTCDateTime)
    end_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    every_n: Mapped[int | None] = mapped_column(Integer)  # None: the job runs once
    every_unit: Mapped[str | None] = mapped_column(String(16))
    # The next slot to run; None once the job has no slot left. Indexed: the scheduler's look.
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    # The creator, whose rights each run has (read anew at every run); None: made with
    # sign-in off. No foreign key: a deleted creator must fail the runs, not lift the checks.
    creator_id: Mapped[int | None] = mapped_column(Integer)
    created_by: Mapped[str | None] = mapped_column(String(63))
    creator_scope: Mapped[str | None] = mapped_column(String(63))  # a narrowed token's project
    # LAST: per "table.column" of the statements, the largest value the last good run read.
    last_values: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class JobRun(db.Model):
    """One slot of a job: claimed by inserting this row (the unique key decides who runs
    it), then its outcome. The job's history."""

    __tablename__ = "job_runs"
    __table_args__ = (UniqueConstraint("job_id", "slot_at"),
                      Index("ix_job_runs_job_id_ended_at", "job_id", "ended_at"),
                      {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    slot_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # queued (waiting for a Celery worker), running, ok, skipped (IF had no rows), error
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    query: Mapped[str] = mapped_column(Text)
    runner: Mapped[str | None] = mapped_column(String(255))  # host:pid:start of the runner
