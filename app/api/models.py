"""Models: /api/projects/<project>/models — train from a query, describe, predict."""

from ..schemas.models import (
    DescribeArgs,
    DescribeCandidate,
    DescribeFeature,
    DescribeInfo,
    ModelIn,
    ModelOut,
    PredictIn,
)
from ..services import models as service
from .base import Blueprint

blp = Blueprint("models", __name__, url_prefix="/api/projects/<name:project>/models",
                description="Models trained from the rows of a query, and their predictions")

# Answers dumped by the service itself (documentation only): describe's records depend on
# the attribute asked for; a prediction is each input row plus the predicted columns.
DESCRIPTION = {"type": "array",
               "items": {"anyOf": [DescribeInfo, DescribeFeature, DescribeCandidate]}}
PREDICTIONS = {"type": "array", "items": {"type": "object", "additionalProperties": {}}}


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, ModelOut(many=True))
@blp.problems(404)
def list_models(project):
    """List the models of a project (every version)."""
    return service.list_models(project)


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(ModelIn)
@blp.response(201, ModelOut)
@blp.problems(404, 409, 422)
def create_model(body, project):
    """Create and train a model from a CREATE MODEL statement."""
    return service.create_model(project, body["query"])


@blp.route("/<model_ref:ref>", methods=["GET"])
@blp.response(200, ModelOut)
@blp.problems(404)
def get_model(project, ref):
    """Get a model by name, or one version of it as name.version."""
    return service.get_model(project, ref)


@blp.route("/<model_ref:ref>", methods=["DELETE"])
@blp.response(204)
@blp.problems(404)
def delete_model(project, ref):
    """Delete a model (all its versions, or the one name.version names) and its artifact."""
    service.delete_model(project, ref)


@blp.route("/<model_ref:ref>/describe", methods=["GET"])
@blp.arguments(DescribeArgs, location="query", as_kwargs=False)
@blp.arguments(DescribeArgs, location="json", as_kwargs=False, required=False)
@blp.response(200)
@blp.doc_response(200, DESCRIPTION)
@blp.problems(404, 409)
def describe_model(query_args, body, project, ref):
    """Describe a trained model: info (default), features or model."""
    attribute = (body or {}).get("attribute") or query_args.get("attribute")
    return service.describe_model(project, ref, attribute)


@blp.route("/<model_ref:ref>/predict", methods=["POST"])
@blp.arguments(PredictIn)
@blp.response(200)
@blp.doc_response(200, PREDICTIONS)
@blp.problems(404, 409, 422)
def predict_model(body, project, ref):
    """Predict the target column for the given rows."""
    return service.predict(project, ref, body["data"])
