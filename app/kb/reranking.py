"""Reranking: a search's best chunks scored again against the question by a rerank model
behind an endpoint an administrator listed, best first.

The endpoint speaks the rerank API that Cohere defined and that vLLM, llama.cpp's server,
Infinity, Jina and LocalAI serve: ``POST {base_url}/rerank`` with ``{"model", "query",
"documents", "top_n"}``, answered ``{"results": [{"index", "relevance_score"}, …]}``. A
cross-encoder scores the question and each chunk together, which a vector search (each
embedded alone) cannot. It runs where the model runs: Quarry ships none, since the
cross-encoder packages looked at on PyPI (flashrank, rerankers, fastembed) fetch their
weights from the Hugging Face hub at first use, which a machine without outside network
cannot do.
"""

from __future__ import annotations

from collections.abc import Sequence

from .embeddings import EmbeddingError, ModelEndpoint

RERANK_PROVIDERS = ("openai", "cohere")


class EndpointReranker(ModelEndpoint):
    kind = "reranking"

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher: better)."""
        if not documents:
            return []
        where = self.where
        answer = self.post("rerank", {"query": query, "documents": list(documents),
                                      "top_n": len(documents)})
        found: dict[int, float] = {}
        try:
            for item in answer["results"]:
                index, score = item["index"], item["relevance_score"]
                if isinstance(index, bool) or not isinstance(index, int) or \
                        isinstance(score, bool) or not isinstance(score, int | float):
                    raise TypeError
                found[index] = float(score)
        except (KeyError, TypeError):
            raise EmbeddingError(f"{where} answered no list of scores (expected "
                                 "{\"results\": [{\"index\", \"relevance_score\"}]})") from None
        if sorted(found) != list(range(len(documents))):
            raise EmbeddingError(f"{where} answered {len(found)} scores for "
                                 f"{len(documents)} chunks")
        return [found[i] for i in range(len(documents))]
