"""Models: /api/projects/<project>/models — train from a query, describe, predict."""

from ..mindsdb.models import parse_create_model
from ..schemas.models import (
    ActivateIn,
    DescribeArgs,
    DescribeCandidate,
    DescribeFeature,
    DescribeInfo,
    ModelIn,
    ModelOut,
    PredictIn,
    RetrainIn,
)
from ..services import models as service
from ..services import training
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
    return training.create_model(parse_create_model(body["query"], project))


@blp.route("/<model_ref:ref>", methods=["GET"])
@blp.response(200, ModelOut)
@blp.problems(404)
def get_model(project, ref):
    """Get a model by name, or one version of it as name.version."""
    return service.get_model(project, ref)


@blp.route("/<model_ref:ref>", methods=["PUT"])
@blp.arguments(ActivateIn)
@blp.response(200, ModelOut)
@blp.problems(404, 409)
def update_model(body, project, ref):
    """Make one version of a model the active one: {"active_version": n}."""
    return service.set_active_version(project, ref, body["active_version"])


@blp.route("/<model_ref:ref>/retrain", methods=["POST"])
@blp.arguments(RetrainIn)
@blp.response(201, ModelOut)
@blp.problems(404, 409, 422)
def retrain_model(body, project, ref):
    """Train version N+1 of a model from its stored query (or a new one), as RETRAIN."""
    return training.retrain_model(training.retrain_spec(project, ref, body))


@blp.route("/<model_ref:ref>/finetune", methods=["POST"])
@blp.arguments(RetrainIn)
@blp.response(201, ModelOut)
@blp.problems(404, 409, 422)
def finetune_model(body, project, ref):
    """Train version N+1 of a model on its rows plus new ones, as FINETUNE."""
    return training.retrain_model(training.retrain_spec(project, ref, body, finetune=True))


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
