"""MindsDB REST routes of objects Quarry does not have: a clear 501, not "No such endpoint".

``mindsdb_sdk`` lists knowledge bases with ``GET /api/projects/<p>/knowledge_bases``; each of
these routes answers 501 problem+json saying what is not supported (the same sentence as the
SQL statements, ``unsupported.py``).
"""

from ..errors import PROBLEM_JSON, NotSupported
from ..mindsdb.unsupported import refusal_for
from ..schemas.common import ProblemSchema
from .base import Blueprint

blp = Blueprint("unsupported", __name__, url_prefix="/api",
                description="MindsDB features Quarry does not have (all answer 501)")

_KB = "/projects/<name:project>/knowledge_bases"


def _not_supported(description: str):
    return blp.alt_response(501, schema=ProblemSchema, content_type=PROBLEM_JSON,
                            description=description)


@blp.route(_KB, methods=["GET", "POST"])
@_not_supported("Knowledge bases are not supported")
def knowledge_bases(project):
    """Knowledge bases (MindsDB): not supported."""
    raise NotSupported(refusal_for("KNOWLEDGE_BASES"))


@blp.route(f"{_KB}/<name:name>", methods=["GET", "PUT", "DELETE"])
@_not_supported("Knowledge bases are not supported")
def knowledge_base(project, name):
    """One knowledge base (MindsDB): not supported."""
    raise NotSupported(refusal_for("KNOWLEDGE_BASES"))


@blp.route(f"{_KB}/<name:name>/completions", methods=["POST"])
@_not_supported("Knowledge bases are not supported")
def knowledge_base_completion(project, name):
    """Completions from a knowledge base (MindsDB): not supported."""
    raise NotSupported(refusal_for("KNOWLEDGE_BASES"))
