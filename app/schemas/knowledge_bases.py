"""Knowledge bases (/api/projects/<p>/knowledge_bases, CREATE KNOWLEDGE_BASE … USING):
MindsDB's shapes."""

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from ..kb.reranking import RERANK_PROVIDERS
from .common import InputSchema, JsonObject, JsonObjects, Name, NonEmptyString

PROVIDERS = ("quarry", "openai")


class ChunkingFields(InputSchema):
    chunk_size = fields.Integer(validate=validate.Range(min=10, max=100_000),
                                load_default=1000)
    chunk_overlap = fields.Integer(validate=validate.Range(min=0, max=99_999),
                                   load_default=200)


class PreprocessingFields(InputSchema):
    text_chunking_config = fields.Nested(ChunkingFields, load_default=lambda: {
        "chunk_size": 1000, "chunk_overlap": 200})


class EmbeddingFields(InputSchema):
    # "quarry": the embedded all-MiniLM-L6-v2; "openai": any OpenAI-compatible endpoint
    # an administrator listed (QUARRY_EMBEDDING_ENDPOINTS).
    provider = fields.String(validate=validate.OneOf(PROVIDERS), load_default="quarry")
    model_name = NonEmptyString()
    model = NonEmptyString()  # mindsdb_sdk's spelling
    base_url = fields.String(validate=validate.Length(min=1, max=2048))
    api_key = fields.String(validate=validate.Length(max=4096), load_only=True)


class RerankingModel(InputSchema):
    """reranking_model = {…}: a rerank endpoint an administrator listed (app/kb/reranking.py);
    "openai" and "cohere" name the same wire (POST <base_url>/rerank)."""

    provider = fields.String(validate=validate.OneOf(RERANK_PROVIDERS), load_default="openai")
    model_name = NonEmptyString()
    model = NonEmptyString()
    base_url = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    api_key = fields.String(validate=validate.Length(max=4096), load_only=True)


class KnowledgeBaseOptions(InputSchema):
    """CREATE KNOWLEDGE_BASE's USING, and the REST body's fields beside the name."""

    content_columns = fields.List(NonEmptyString(), validate=validate.Length(min=1, max=64))
    metadata_columns = fields.List(NonEmptyString(), validate=validate.Length(max=256))
    id_column = NonEmptyString()
    preprocessing = fields.Nested(PreprocessingFields)
    embedding_model = fields.Nested(EmbeddingFields)
    # false / null / absent (no reranking), or RerankingModel's object (checked by the service)
    reranking_model = fields.Raw(allow_none=True)
    storage = fields.Raw(allow_none=True)
    params = JsonObject(allow_none=True)

    @validates_schema
    def _each_column_once(self, data, **_kwargs):
        """A column is named once: in content_columns or in metadata_columns, not twice (which
        of the two it would be, and how often its text would be embedded, is not for us to
        guess)."""
        content = data.get("content_columns") or ["content"]  # the default, as the service's
        metadata = data.get("metadata_columns") or []
        for field, names in (("content_columns", content), ("metadata_columns", metadata)):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValidationError(f"{', '.join(twice)} named twice", field)
        both = sorted(set(content) & set(metadata))
        if both:
            raise ValidationError(f"{', '.join(both)} is also in content_columns: a column is "
                                  "either content or metadata", "metadata_columns")


class KnowledgeBaseFields(KnowledgeBaseOptions):
    name = Name(required=True)


class KnowledgeBaseIn(InputSchema):
    knowledge_base = fields.Nested(KnowledgeBaseFields, required=True)


class KnowledgeBaseRows(InputSchema):
    rows = JsonObjects(message="rows: a JSON object or a list of them")
    query = fields.String(validate=validate.Length(min=1, max=1_000_000))
    params = JsonObject(allow_none=True)


class KnowledgeBasePut(InputSchema):
    knowledge_base = fields.Nested(KnowledgeBaseRows, required=True)


class EmbeddingOut(Schema):
    provider = fields.String()
    model_name = fields.String()
    base_url = fields.String(allow_none=True)


class KnowledgeBaseOut(Schema):
    name = fields.String()
    project = fields.String()
    embedding_model = fields.Nested(EmbeddingOut)
    reranking_model = fields.Raw(allow_none=True)
    vector_database = fields.String(allow_none=True)  # the store named by storage = …
    vector_database_table = fields.String(allow_none=True)
    content_columns = fields.List(fields.String())
    metadata_columns = fields.List(fields.String(), allow_none=True)
    id_column = fields.String()
    params = fields.Dict()
    # None in a listing when the base's vector store cannot be reached
    documents = fields.Integer(allow_none=True,
                               metadata={"description": "documents (ids) held"})
    chunks = fields.Integer(allow_none=True)
    created_at = fields.DateTime()
    updated_at = fields.DateTime()


class InsertOut(Schema):
    rows = fields.Integer(metadata={"description": "rows inserted (upserted by id)"})
    chunks = fields.Integer()


def _scalars(values: dict) -> None:
    wrong = sorted(k for k, v in values.items()
                   if v is None or not isinstance(v, str | int | float | bool))
    if wrong:
        raise ValidationError(f"{', '.join(wrong)}: a metadata value to match is a string, "
                              "a number or true/false")


class KnowledgeBaseCompletionIn(InputSchema):
    """POST …/knowledge_bases/<kb>/completions (MindsDB's; mindsdb_sdk's kb.completion)."""

    query = fields.String(required=True, validate=validate.Length(min=1, max=100_000))
    type = fields.String(validate=validate.OneOf(("chat", "context")), load_default="chat")
    limit = fields.Integer(strict=True, validate=validate.Range(min=1, max=100),
                           load_default=10)
    keywords = fields.String(validate=validate.Length(min=1, max=10_000))
    metadata = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=255)),
                           validate=_scalars)
    llm_model = NonEmptyString()
    prompt_template = fields.String(validate=validate.Length(min=1, max=100_000))
    model_provider = fields.String(validate=validate.OneOf(("openai",)))


class KnowledgeBaseDocument(Schema):
    id = fields.String()
    chunk_id = fields.String()
    content = fields.String()
    metadata = fields.Dict()
    relevance = fields.Float(allow_none=True)
    rank = fields.Integer(metadata={"description": "1 for the best passage"})


class KnowledgeBaseAnswer(Schema):
    role = fields.String()
    content = fields.String()
    context = fields.List(fields.Nested(KnowledgeBaseDocument))


class KnowledgeBaseCompletionOut(Schema):
    documents = fields.List(fields.Nested(KnowledgeBaseDocument),
                            metadata={"description": "type context: the passages"})
    message = fields.Nested(KnowledgeBaseAnswer,
                            metadata={"description": "type chat: the model's answer"})
