"""Knowledge bases: /api/projects/<project>/knowledge_bases (MindsDB's routes)."""

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import Unprocessable
from ..mcp import kb_completions
from ..schemas.knowledge_bases import (
    InsertOut,
    KnowledgeBaseCompletionIn,
    KnowledgeBaseCompletionOut,
    KnowledgeBaseIn,
    KnowledgeBaseOut,
    KnowledgeBasePut,
)
from ..services import knowledge_bases as service
from .base import Blueprint

blp = Blueprint("knowledge_bases", __name__,
                url_prefix="/api/projects/<name:project>/knowledge_bases",
                description="Knowledge bases: a project's text, searched by meaning and words")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, KnowledgeBaseOut(many=True))
@blp.problems(404)
def list_knowledge_bases(project):
    """List a project's knowledge bases."""
    return service.list_knowledge_bases(project)


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(KnowledgeBaseIn)
@blp.response(201, KnowledgeBaseOut)
@blp.problems(404, 409, 422)
def create_knowledge_base(body, project):
    """Create a knowledge base."""
    fields = dict(body["knowledge_base"])
    with _fields_in_body():
        return service.create_knowledge_base(project, fields.pop("name"), fields)


@blp.route("/<name:name>", methods=["GET"])
@blp.response(200, KnowledgeBaseOut)
@blp.problems(404)
def get_knowledge_base(project, name):
    """Get a knowledge base."""
    return service.get_knowledge_base(project, name)


@blp.route("/<name:name>", methods=["PUT"])
@blp.arguments(KnowledgeBasePut)
@blp.response(200, InsertOut)
@blp.problems(404, 422)
def insert_into_knowledge_base(body, project, name):
    """Insert rows, or the rows of a query, into a knowledge base (upsert by id)."""
    data = body["knowledge_base"]
    with _fields_in_body():
        return service.insert(project, name, rows=data.get("rows"), query=data.get("query"))


@blp.route("/<name:name>/completions", methods=["POST"])
@blp.arguments(KnowledgeBaseCompletionIn)
@blp.response(200, KnowledgeBaseCompletionOut)
@blp.problems(404, 422, 502)
def knowledge_base_completion(body, project, name):
    """The passages that answer a question (type context), or a model's answer from them
    (type chat, the default: the model endpoint an administrator set)."""
    return kb_completions.complete(project, name, body)


@blp.route("/<name:name>", methods=["DELETE"])
@blp.response(204)
@blp.problems(404)
def delete_knowledge_base(project, name):
    """Drop a knowledge base."""
    service.drop_knowledge_base(project, name)


@contextmanager
def _fields_in_body() -> Iterator[None]:
    """The service names a refused field as it knows it; the body holds the fields under
    ``knowledge_base``, where its errors' paths start."""
    try:
        yield
    except Unprocessable as exc:
        raise exc.within("knowledge_base") from None
