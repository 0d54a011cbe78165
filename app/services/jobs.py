"""Jobs: statements a project runs on a schedule, as their creator, each slot once.

- a job's name is unique per project (a unique key); creating and dropping need the right to
  change the project, reading its jobs and their history the right to read it;
- the schedule: a first slot (START, default now), optionally EVERY n minute|hour|day|week|
  month after it, until END; times are UTC. Without EVERY the job has one slot;
- a slot is claimed by inserting its run row, ``(job, slot)`` unique in the store: however
  many processes and instances look at the same moment, only one insert succeeds, and only
  that process runs (or queues) the slot. The same transaction moves the job's next slot
  past now, so slots missed while nothing ran (downtime) are run once, not once each;
- a job whose run has not ended gets no new run (no overlap with itself); a run left
  unfinished by a process that died is marked error (at once on the same host, where its
  pid tells; after JOBS_RUN_STALE_S from another host);
- what a statement may be, and the creator's rights, are checked by the SQL adapter
  (``app/mindsdb/jobs.py``), which parses statements; this module keeps the rules of the
  records: names, times, slots, claims and outcomes.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from ..errors import NameTaken, ObjectNotFound, Unprocessable
from ..extensions import db
from ..rules.names import lookup_key, name_key, validate_name
from ..store import Job, JobRun, Project
from ..store.types import utcnow
from . import access, audit
from .common import commit, delete_or_gone
from .projects import get_project
from .trainer import trainer_alive

# The units of EVERY, each with its length (a month is counted on the calendar).
UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1),
         "day": timedelta(days=1), "week": timedelta(weeks=1), "month": None}
_EVERY = re.compile(r"\s*(?:every\s+)?(?:(\d{1,6})\s+)?([a-z]+?)s?\s*", re.IGNORECASE)
_ALIASES = {"min": "minute", "minute": "minute", "hour": "hour", "hr": "hour", "day": "day",
            "week": "week", "month": "month"}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
CLAIMS_PER_LOOK = 100
RUNNING = ("queued", "running")


class JobNotFound(ObjectNotFound):
    kind = "Job"
    title = "Job not found"


@dataclass(frozen=True)
class Schedule:
    start_at: datetime
    end_at: datetime | None
    every_n: int | None
    every_unit: str | None

    def describe(self) -> str | None:
        if self.every_n is None:
            return None
        return f"every {self.every_n} {self.every_unit}{'s' if self.every_n != 1 else ''}"


def _invalid(detail: str, field: str) -> Unprocessable:
    return Unprocessable(detail, title="Invalid schedule", errors={field: [detail]})


def parse_every(text: str | None) -> tuple[int | None, str | None]:
    """'2 hours', 'minute', '1 day' → (n, unit); (None, None) for no repetition."""
    if text is None or not str(text).strip():
        return None, None
    match = _EVERY.fullmatch(str(text))
    unit = _ALIASES.get(match.group(2).lower()) if match else None
    if unit is None:
        raise _invalid(f"EVERY {str(text)[:40]!r}: write EVERY [n] minute, hour, day, week "
                       "or month (e.g. EVERY 2 hours)", "schedule_str")
    count = int(match.group(1) or 1)
    if count < 1:
        raise _invalid("EVERY needs a number of at least 1", "schedule_str")
    return count, unit


def parse_time(text: str | datetime | None, field: str) -> datetime | None:
    """A UTC time: 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM[:SS]' (or ISO 8601, T and zone too)."""
    if text is None or isinstance(text, datetime):
        return text if text is None or text.tzinfo else text.replace(tzinfo=UTC)
    try:
        value = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise _invalid(f"{field.upper()[:-3]} {str(text)[:40]!r} is not a time: write "
                       "'YYYY-MM-DD HH:MM:SS' (UTC)", field) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def schedule_of(start: Any, end: Any, every: str | None, now: datetime | None = None
                ) -> Schedule:
    now = now or utcnow()
    start_at = parse_time(start, "start_at") or now.replace(microsecond=0)
    end_at = parse_time(end, "end_at")
    if end_at is not None and end_at < now:
        raise _invalid(f"END {end_at:{TIME_FORMAT}} is in the past: the job would never run",
                       "end_at")
    if end_at is not None and start_at > end_at:
        raise _invalid(f"START {start_at:{TIME_FORMAT}} is after END {end_at:{TIME_FORMAT}}: "
                       "the job would never run", "end_at")
    every_n, unit = parse_every(every)
    return Schedule(start_at, end_at, every_n, unit)


def _add_months(value: datetime, months: int) -> datetime:
    month = value.month - 1 + months
    year, month = value.year + month // 12, month % 12 + 1
    day = min(value.day, calendar.monthrange(year, month)[1])
    return value.replace(year=year, month=month, day=day)


def slot_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The first slot of ``schedule`` strictly after ``after``; None when there is none."""
    start = schedule.start_at
    if start > after:
        slot = start
    elif schedule.every_n is None:
        return None
    elif schedule.every_unit == "month":
        months = ((after.year - start.year) * 12 + after.month - start.month) \
            // schedule.every_n * schedule.every_n
        slot = _add_months(start, months)
        while slot <= after:
            months += schedule.every_n
            slot = _add_months(start, months)
    else:
        step = UNITS[schedule.every_unit] * schedule.every_n
        slot = start + step * ((after - start) // step + 1)
    if schedule.end_at is not None and slot > schedule.end_at:
        return None
    return slot


def _schedule(job: Job) -> Schedule:
    return Schedule(job.start_at, job.end_at, job.every_n, job.every_unit)


# --- the records -------------------------------------------------------------------------------

def create_job(project_name: str, name: str, query: str, if_query: str | None,
               schedule: Schedule) -> dict[str, Any]:
    """Create job ``project.name`` (its statements already checked by the SQL adapter)."""
    validate_name("job", name, error=Unprocessable)
    project = get_project(project_name, "write")
    if _find(project, name) is not None:
        raise NameTaken("Job", name, project.name)
    actor = access.current_actor()
    row = Job(project_id=project.id, name=name, name_key=name_key(name), query=query,
              if_query=if_query, start_at=schedule.start_at, end_at=schedule.end_at,
              every_n=schedule.every_n, every_unit=schedule.every_unit,
              next_run_at=schedule.start_at,
              creator_id=actor.user_id if actor else None,
              created_by=actor.user_name if actor else None,
              creator_scope=actor.project_key if actor else None, last_values={})
    db.session.add(row)
    audit.record_change("job", "create", f"{project.name}.{name}", None,
                        {"query": query, "if_query": if_query,
                         "schedule": schedule.describe()})
    commit(lambda: NameTaken("Job", name, project.name))
    return job_entry(row, project.name)


def drop_job(project_name: str, name: str) -> None:
    project = get_project(project_name, "write")
    row = _require(project, name)
    audit.record_change("job", "drop", f"{project.name}.{row.name}", {"query": row.query},
                        None)
    delete_or_gone(delete(Job).where(Job.id == row.id),
                   lambda: JobNotFound(name, project.name))


def list_jobs(project_name: str) -> list[dict[str, Any]]:
    project = get_project(project_name, "read")
    rows = db.session.scalars(select(Job).where(Job.project_id == project.id)
                              .order_by(Job.name_key))
    return [job_entry(row, project.name) for row in rows]


def get_job(project_name: str, name: str) -> dict[str, Any]:
    project = get_project(project_name, "read")
    return job_entry(_require(project, name), project.name)


def history(project_name: str, name: str | None = None) -> list[dict[str, Any]]:
    """The runs of a project's jobs (of job ``name`` only, when given), newest first."""
    project = get_project(project_name, "read")
    query = select(JobRun, Job.name).join(Job, Job.id == JobRun.job_id) \
        .where(Job.project_id == project.id)
    if name is not None:
        query = query.where(Job.id == _require(project, name).id)
    rows = db.session.execute(query.order_by(JobRun.slot_at.desc(), JobRun.id.desc()))
    return [run_entry(run, job_name, project.name) for run, job_name in rows]


def visible_history() -> list[dict[str, Any]]:
    """log.jobs_history: the runs of every job in the projects the caller sees."""
    query = select(JobRun, Job.name, Project.name).join(Job, Job.id == JobRun.job_id) \
        .join(Project, Project.id == Job.project_id)
    visible = access.visible_project_filter()
    if visible is not None:
        query = query.where(visible)
    rows = db.session.execute(query.order_by(JobRun.slot_at.desc(), JobRun.id.desc()))
    return [run_entry(run, job_name, project) for run, job_name, project in rows]


def job_entry(row: Job, project: str) -> dict[str, Any]:
    return {"name": row.name, "project": project, "query": row.query,
            "if_query": row.if_query, "start_at": row.start_at, "end_at": row.end_at,
            "next_run_at": row.next_run_at, "schedule_str": _schedule(row).describe(),
            "created_by": row.created_by, "created_at": row.created_at}


def run_entry(run: JobRun, job_name: str, project: str) -> dict[str, Any]:
    ended = run.ended_at
    return {"name": job_name, "project": project, "slot_at": run.slot_at,
            "start_at": run.started_at, "end_at": ended, "outcome": run.outcome,
            "duration_s": None if ended is None else
            round((ended - run.started_at).total_seconds(), 3),
            "error": run.error, "query": run.query}


def _find(project: Project, name: str) -> Job | None:
    return db.session.scalar(select(Job).where(Job.project_id == project.id,
                                               Job.name_key == lookup_key(name)))


def _require(project: Project, name: str) -> Job:
    row = _find(project, name)
    if row is None:
        raise JobNotFound(name, project.name)
    return row


# --- the scheduler's side ------------------------------------------------------------------------

@dataclass(frozen=True)
class Claimed:
    run_id: int
    slot_at: datetime
    started_at: datetime


def claim_due(runner: str, queued: bool, now: datetime | None = None,
              limit: int | None = None) -> list[Claimed]:
    """Claim the due slot of every due job that has no run under way; the claims won here.

    ``queued``: the runs wait for a Celery worker (outcome ``queued``) instead of starting
    in this process; ``limit``: claim at most that many. Called without a caller (no rights
    are checked: nothing is shown).

    On PostgreSQL the due jobs are read ``FOR UPDATE SKIP LOCKED`` and claimed in that one
    transaction: processes looking at the same moment each take other jobs, instead of all
    trying the oldest ones in turn and waiting on each other's row locks (100 jobs due at one
    minute, six processes). Elsewhere (SQLite: one writer at a time anyway) each claim is a
    transaction of its own. Either way the (job, slot) row stays unique: a slot runs once."""
    now = now or utcnow()
    wanted = CLAIMS_PER_LOOK if limit is None else min(limit, CLAIMS_PER_LOOK)
    # Jobs whose run is still going come last: their slot mostly waits (no overlap), and
    # they must not take the places of the others (a run of theirs may have died: then
    # ``_claim`` ends it and they run).
    going = (select(JobRun.id).where(JobRun.job_id == Job.id, JobRun.ended_at.is_(None))
             .exists())
    due = (select(Job.id, Job.next_run_at).where(Job.next_run_at <= now)
           .order_by(going, Job.next_run_at, Job.id))
    if db.session.get_bind().dialect.name == "postgresql":
        locked = db.session.execute(
            due.limit(wanted).with_for_update(of=Job, skip_locked=True)).all()
        claimed = []
        for job_id, slot in locked:
            try:
                with db.session.begin_nested():
                    won = _claim(job_id, slot, runner, queued, now)
            except (IntegrityError, _Lost):
                continue
            if won is not None:
                claimed.append(won)
        db.session.commit()
        return claimed
    rows = db.session.execute(due.limit(CLAIMS_PER_LOOK)).all()
    db.session.rollback()  # end the read: each claim is a transaction of its own
    claimed = []
    for job_id, slot in rows:
        if len(claimed) >= wanted:
            break
        try:
            won = _claim(job_id, slot, runner, queued, now)
        except (IntegrityError, _Lost):
            won = None  # another process inserted this slot's row first: its run
        if won is None:
            db.session.rollback()
            continue
        db.session.commit()
        claimed.append(won)
    return claimed


class _Lost(Exception):
    """Another process moved the job's next slot between the read and the claim."""


def _claim(job_id: int, slot: datetime, runner: str, queued: bool,
           now: datetime) -> Claimed | None:
    """Claim one job's slot in the caller's transaction (the caller commits, or rolls back
    on None or an exception)."""
    job = db.session.get(Job, job_id, populate_existing=True)
    if job is None or job.next_run_at != slot:
        return None  # dropped, or claimed and moved on by another process meanwhile
    busy = db.session.execute(select(JobRun).where(
        JobRun.job_id == job_id, JobRun.ended_at.is_(None)).limit(1)).scalar()
    if busy is not None and not _ended_stale(busy, now):
        return None  # its run is still going: the slot waits (no overlap with itself)
    started = utcnow()
    run_id = db.session.execute(insert(JobRun).values(
        job_id=job_id, slot_at=slot, started_at=started, query=job.query,
        outcome="queued" if queued else "running", runner=runner[:255])
        .returning(JobRun.id)).scalar_one()
    moved = db.session.execute(
        update(Job).where(Job.id == job_id, Job.next_run_at == slot)
        .values(next_run_at=slot_after(_schedule(job), max(started, slot)))).rowcount
    if not moved:
        raise _Lost
    return Claimed(run_id, slot, started)


def _ended_stale(run: JobRun, now: datetime) -> bool:
    """Mark a run error when the process running it is gone (on this host: its pid), or when
    it has been unfinished for JOBS_RUN_STALE_S (a process on another host, a lost Celery
    message): whether it was (then its job may run again)."""
    limit = now - timedelta(seconds=current_app.config["JOBS_RUN_STALE_S"])
    dead = run.outcome == "running" and not trainer_alive(run.runner, now, now)
    if run.started_at >= limit and not dead:
        return False
    return bool(db.session.execute(
        update(JobRun).where(JobRun.id == run.id, JobRun.ended_at.is_(None))
        .values(ended_at=now, outcome="error",
                error="The run did not finish: the process running it stopped (or it ran "
                      "longer than QUARRY_JOBS_RUN_STALE_S)")).rowcount)


@dataclass(frozen=True)
class RunPlan:
    """What a claimed run needs: read from the store when it starts."""

    run_id: int
    job_id: int
    job: str
    project: str
    query: str
    if_query: str | None
    slot_at: datetime
    started_at: datetime
    previous_start: datetime | None
    creator_id: int | None
    created_by: str | None
    creator_scope: str | None
    last_values: dict[str, Any]


def start_run(run_id: int, runner: str) -> RunPlan | None:
    """Mark a claimed run as running (a Celery worker takes a queued one); its plan, or None
    when it is gone (its job dropped) or already taken."""
    started = utcnow()
    taken = db.session.execute(
        update(JobRun).where(JobRun.id == run_id, JobRun.outcome.in_(RUNNING),
                             JobRun.ended_at.is_(None))
        .values(outcome="running", started_at=started, runner=runner[:255])).rowcount
    row = db.session.execute(
        select(JobRun, Job, Project.name).join(Job, Job.id == JobRun.job_id)
        .join(Project, Project.id == Job.project_id).where(JobRun.id == run_id)).first()
    if not taken or row is None:
        db.session.rollback()
        return None
    run, job, project = row
    previous = db.session.scalar(
        select(JobRun.started_at).where(JobRun.job_id == job.id, JobRun.id != run_id,
                                        JobRun.slot_at < run.slot_at)
        .order_by(JobRun.slot_at.desc()).limit(1))
    db.session.commit()
    return RunPlan(run.id, job.id, job.name, project, job.query, job.if_query, run.slot_at,
                   started, previous, job.creator_id, job.created_by, job.creator_scope,
                   dict(job.last_values or {}))


def finish_run(run_id: int, outcome: str, error: str | None,
               last_values: dict[str, Any] | None = None) -> datetime:
    """Record a run's end; ``last_values`` (after a good run): what LAST reads from next."""
    ended = utcnow()
    run = db.session.get(JobRun, run_id)
    if run is not None:
        run.ended_at, run.outcome, run.error = ended, outcome, error
        if last_values:
            job = db.session.get(Job, run.job_id)
            if job is not None:
                job.last_values = {**(job.last_values or {}), **last_values}
        db.session.commit()
    return ended
