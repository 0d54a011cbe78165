"""MindsDB's object tree: /api/tree (mindsdb_sdk's project.views.list() reads it)."""

from marshmallow import Schema, fields

from ..services import sqlviews as service
from .base import Blueprint

blp = Blueprint("tree", __name__, url_prefix="/api/tree",
                description="The object tree: databases, a project's models and views")


class TreeNodeOut(Schema):
    name = fields.String()
    # db | table, and data | project | system | table | model | view
    class_ = fields.String(data_key="class", attribute="class")
    type = fields.String()
    engine = fields.String(allow_none=True)


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, TreeNodeOut(many=True))
def list_tree():
    """The databases."""
    return service.object_tree()


@blp.route("/<name:item>", methods=["GET"])
@blp.response(200, TreeNodeOut(many=True))
@blp.problems(404)
def list_tree_item(item):
    """A project's models and views, or a data source's tables."""
    return service.object_tree(item)
