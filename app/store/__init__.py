"""SQLAlchemy mapped classes: columns, relationships and constraints only."""

from .agent import Agent, AgentSkill
from .auth import ApiToken, LoginFailure, User, UserSession
from .data_source import DataSourceRecord
from .ml_model import MLModel
from .project import Project
from .running_query import RunningQuery
from .skill import Skill

__all__ = ["Agent", "AgentSkill", "ApiToken", "DataSourceRecord", "LoginFailure", "MLModel",
           "Project", "RunningQuery", "Skill", "User", "UserSession"]
