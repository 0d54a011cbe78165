"""Completions from a knowledge base (MindsDB's ``POST …/knowledge_bases/<kb>/completions``,
``mindsdb_sdk``'s ``kb.completion()``).

- ``type: "context"``: the chunks that best answer ``query`` (by meaning, fused with the
  words of ``keywords`` when given; ``metadata`` keeps chunks whose metadata equal those
  values), as ``{"documents": [...]}``.
- ``type: "chat"`` (MindsDB's default): the same chunks handed to the administrator's model
  endpoint (QUARRY_LLM_BASE_URL, QUARRY_LLM_MODEL; ``llm_model`` may name another model of
  that endpoint, never another address), and its answer with the chunks it was given.

The search is the caller's, with their rights, as ``SELECT … WHERE content = '…'``; it is in
the audit log. The question and the chunks are put in the prompt by plain replacement of
``{context}`` and ``{question}``: a template is text, never a format string.
"""

from __future__ import annotations

import time
from typing import Any

from flask import current_app

from ..errors import QuarryError, Unprocessable
from ..kb.index import Filter
from ..services import knowledge_bases as kb_service
from .completions import Endpoint
from .tools import record_call

DEFAULT_PROMPT = (
    "Answer the question from the context below: the passages of a knowledge base that best "
    "match it, each after its document's id. If the context does not hold the answer, say "
    "that it does not; do not make one up.\n\nContext:\n{context}\n\nQuestion: {question}")


def complete(project: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """The answer of one completion request (its body as the schema loaded it)."""
    if body["type"] == "chat":
        endpoint = _endpoint(body.get("llm_model"))  # 422 before anything is searched
    documents = _documents(project, name, body)
    if body["type"] == "context":
        return {"documents": documents}
    template = body.get("prompt_template") or DEFAULT_PROMPT
    context = "\n\n".join(f"[{d['id']}] {d['content']}" for d in documents)
    prompt = template.replace("{context}", context).replace("{question}", body["query"])
    reply = endpoint.chat([{"role": "user", "content": prompt}], [],
                          current_app.config["AGENT_TIMEOUT_S"])
    return {"message": {"role": "assistant", "content": reply.get("content") or "",
                        "context": documents}}


def _endpoint(model: str | None) -> Endpoint:
    config = current_app.config
    if not config["LLM_BASE_URL"] or not (model or config["LLM_MODEL"]):
        raise Unprocessable(
            "A chat completion needs the model endpoint an administrator sets: "
            "QUARRY_LLM_BASE_URL and QUARRY_LLM_MODEL (or llm_model in the request); "
            "type \"context\" answers with the knowledge base's passages alone",
            title="No model endpoint")
    return Endpoint(config["LLM_BASE_URL"], model or config["LLM_MODEL"],
                    config["LLM_API_KEY"] or None)


def _documents(project: str, name: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    keywords = body.get("keywords")
    filters = [Filter(key, "=", value) for key, value in (body.get("metadata") or {}).items()]
    label = f"-- knowledge base completion {project}.{name} ({body['type']})"
    started = time.perf_counter()
    try:
        hits = kb_service.search(project, name, content=body["query"], filters=filters,
                                 limit=body["limit"], alpha=None if keywords is None else 0.5,
                                 words=keywords)
    except QuarryError as exc:
        record_call(label, project, None, started, "error", exc.detail)
        raise
    record_call(label, project, len(hits), started, "ok", None)
    return [{"id": hit["id"], "chunk_id": hit["chunk_id"], "content": hit["chunk_content"],
             "metadata": hit["metadata"], "relevance": hit["relevance"], "rank": rank}
            for rank, hit in enumerate(hits, 1)]


__all__ = ["DEFAULT_PROMPT", "complete"]
