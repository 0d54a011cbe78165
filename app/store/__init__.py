"""SQLAlchemy mapped classes: columns, relationships and constraints only."""

from .access import AuditRecord, ProjectMember, SourceGrant
from .agent import Agent, AgentSkill
from .auth import ApiToken, LoginFailure, User, UserSession
from .catalog import CatalogVersion
from .console import ConsoleHistory, SavedQuery
from .data_source import DatabaseName, DataSourceRecord
from .job import Job, JobRun
from .knowledge_base import KnowledgeBase
from .ml_model import MLModel
from .project import Project
from .running_query import RunningQuery
from .skill import Skill
from .sql_view import SqlView
from .uploaded_file import UploadedFile

__all__ = ["Agent", "AgentSkill", "ApiToken", "AuditRecord", "CatalogVersion", "ConsoleHistory",
           "DatabaseName", "DataSourceRecord", "Job", "JobRun", "KnowledgeBase", "LoginFailure",
           "MLModel",
           "Project", "ProjectMember",
           "RunningQuery", "SavedQuery", "Skill", "SourceGrant", "SqlView", "UploadedFile", "User",
           "UserSession"]
