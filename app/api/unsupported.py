"""MindsDB REST routes of features Quarry does not have: a clear 501, not "No such endpoint".

``mindsdb_sdk``'s ``kb.completion()`` posts to ``…/knowledge_bases/<kb>/completions``:
knowledge bases are searched (SELECT … WHERE content = '…'), they do not answer in prose.
"""

from ..errors import PROBLEM_JSON, NotSupported
from ..schemas.common import ProblemSchema
from .base import Blueprint

blp = Blueprint("unsupported", __name__, url_prefix="/api",
                description="MindsDB features Quarry does not have (all answer 501)")


@blp.route("/projects/<name:project>/knowledge_bases/<name:name>/completions",
           methods=["POST"])
@blp.alt_response(501, schema=ProblemSchema, content_type=PROBLEM_JSON,
                  description="Completions from a knowledge base are not supported")
def knowledge_base_completion(project, name):
    """Completions from a knowledge base (MindsDB): not supported."""
    raise NotSupported("Completions from a knowledge base are not supported by Quarry: "
                       "search it (SELECT * FROM p.kb WHERE content = '…') and give the "
                       "chunks to an agent or a model")
