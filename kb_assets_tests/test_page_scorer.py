"""The page scorer (issue 44): the shipped file loads, scores pages and names the search's version; a missing,
corrupt or foreign file is a warning, never an error (the pages keep the summed order)."""

from __future__ import annotations

import json

import numpy as np

from kb_assets.retrieval import SEARCH_VERSION, search_version
from kb_assets.retrieval.page_scorer import FEATURES, PAGE_FEATURES, SCORER_FILE, load_scorer, page_features, train


def test_the_shipped_scorer_loads_scores_pages_and_is_part_of_the_search_version():
    scorer, warning = load_scorer()
    assert scorer is not None and warning is None, warning
    assert search_version() == f"{SEARCH_VERSION}+scorer:{scorer.version}"
    pages = [page_features({name: 0.1 * n for name in PAGE_FEATURES}, {"asked": 1}) for n in range(5)]
    scores = scorer.score(np.asarray(pages))
    assert scores.shape == (5,) and np.all(np.isfinite(scores))


def test_a_missing_corrupt_or_foreign_scorer_file_is_a_warning_not_an_error(tmp_path):
    missing = tmp_path / "missing.json"
    assert load_scorer(missing) == (None, load_scorer(missing)[1]) and "missing.json" in load_scorer(missing)[1]
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    foreign = tmp_path / "foreign.json"
    foreign.write_text(
        json.dumps({"format": 1, "version": "x", "features": ["other"], "mean": [0], "scale": [1], "weights": [1]})
    )
    older = tmp_path / "older.json"
    older.write_text(json.dumps({**json.loads(SCORER_FILE.read_text()), "format": 0}))
    for path in (corrupt, foreign, older):
        scorer, warning = load_scorer(path)
        assert scorer is None and path.name in warning and "summed order" in warning


def test_training_puts_the_evidence_page_first_on_questions_like_those_it_learned_from():
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(40):
        x = rng.random((8, len(FEATURES)))
        y = np.zeros(8)
        best = rng.integers(8)
        x[best, FEATURES.index("analysis")] += 2.0  # the evidence page is the routed one, whatever its relevance
        y[best] = 1
        groups.append((x, y))
    scorer = train(groups, version="test")
    assert all(np.argmax(scorer.score(x)) == np.argmax(y) for x, y in groups)
