"""A model whose folder declares prompts (sentence-transformers' ``config_sentence_transformers.json``, as
E5 and BGE do) reads passages and queries after them; a model without prompts reads texts as they are.
Real MiniLM weights, in a folder that adds E5's prompts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kb_assets.embedding.model import EmbeddingModel, resolve_model_path

pytestmark = pytest.mark.slow
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    source, _ = resolve_model_path("all-MiniLM-L6-v2")
    folder = tmp_path_factory.mktemp("prompted-minilm")
    for entry in source.iterdir():
        if entry.name != "config_sentence_transformers.json":
            (folder / entry.name).symlink_to(entry)
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": PROMPTS}))
    return EmbeddingModel(str(folder), encoder="torch"), EmbeddingModel("all-MiniLM-L6-v2", encoder="torch")


def test_a_prompted_model_reads_passages_and_queries_after_their_prompts(models):
    prompted, plain = models
    passage, query = "Nightly backups are kept for 35 days.", "How long are backups kept?"
    assert (prompted.passage_prompt, prompted.query_prompt) == ("passage: ", "query: ")
    assert _cosine(prompted.encode([passage]), plain.encode(["passage: " + passage])) > 0.9999
    assert _cosine(prompted.encode_queries([query]), plain.encode(["query: " + query])) > 0.9999
    assert _cosine(prompted.encode_queries([query]), plain.encode([query])) < 0.999  # the prompt reached the model
    assert prompted.count_tokens([passage]) == plain.count_tokens(["passage: " + passage])  # chunks fit with it


def test_a_model_without_prompts_reads_texts_as_they_are(models):
    _, plain = models
    query = "How long are backups kept?"
    assert plain.prompts == {} and plain.query_prompt == plain.passage_prompt == ""
    assert np.array_equal(plain.encode_queries([query]), plain.encode([query]))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] @ b[0])
