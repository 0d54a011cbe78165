"""Models: /api/projects/<project>/models — train from a query, describe, predict."""

from ..mindsdb.models import parse_create_model
from ..schemas.models import DescribeArgs, ModelIn, ModelOut, PredictIn
from ..services import models as service
from ..services import training
from .base import Blueprint

blp = Blueprint("models", __name__, url_prefix="/api/projects/<string:project>/models",
                description="Models trained from the rows of a query, and their predictions")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, ModelOut(many=True))
def list_models(project):
    """List the models of a project (every version)."""
    return service.list_models(project)


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(ModelIn)
@blp.response(201, ModelOut)
def create_model(body, project):
    """Create and train a model from a CREATE MODEL statement."""
    return training.create_model(parse_create_model(body["query"], project))


@blp.route("/<string:ref>", methods=["GET"])
@blp.response(200, ModelOut)
def get_model(project, ref):
    """Get a model by name, or one version of it as name.version."""
    return service.get_model(project, ref)


@blp.route("/<string:ref>", methods=["DELETE"])
@blp.response(204)
def delete_model(project, ref):
    """Delete a model (all its versions, or the one name.version names) and its artifact."""
    service.delete_model(project, ref)


@blp.route("/<string:ref>/describe", methods=["GET"])
@blp.arguments(DescribeArgs, location="query", as_kwargs=False)
@blp.arguments(DescribeArgs, location="json", as_kwargs=False)
@blp.response(200)
def describe_model(query_args, body, project, ref):
    """Describe a trained model: info (default), features or model."""
    attribute = (body or {}).get("attribute") or query_args.get("attribute")
    return service.describe_model(project, ref, attribute)


@blp.route("/<string:ref>/predict", methods=["POST"])
@blp.arguments(PredictIn)
@blp.response(200)
def predict_model(body, project, ref):
    """Predict the target column for the given rows."""
    return service.predict(project, ref, body["data"])
