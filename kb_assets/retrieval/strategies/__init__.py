"""Search strategies by name: how a request's candidates become its ranked results.

The strategy named ``NAME`` is the module ``strategies/NAME.py``, which defines

    def rank(searcher: Searcher, request: SearchRequest, response: SearchResponse) -> list[JsonObject]

returning the results, best first, at most ``request.limit`` (warnings go into ``response``). It builds
on the searcher's stages: ``searcher.candidates`` (every candidate of the fan-out, scored), or one by
one ``searcher.prepare`` (the query), ``searcher.fan_out`` (Milvus searches), ``searcher.score`` and
``searcher.page_facts``; ``searcher.catalog``, ``searcher.pool`` and ``searcher.config`` are there too.

Adding a strategy is that module plus its name in ``STRATEGIES``: the command line's ``--strategy``
choices, the API's validation and the check of ``KB_SEARCH_STRATEGY`` all come from here. Modules are
imported on first use, so settings and the command line can name strategies without loading search.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from kb_assets.lib.json_types import JsonObject
from kb_assets.retrieval.request import SearchRequest, SearchResponse
from kb_assets.settings import SearchConfig

# (searcher, request, response) -> ranked rows; the searcher is ``retrieval.search.Searcher``, which
# imports this module (so it is not named here)
Rank = Callable[[Any, SearchRequest, SearchResponse], list[JsonObject]]

STRATEGIES = ("hybrid", "pageindex")
# measured better on the dev set and on paraphrased questions (benchmarks/retrieval_quality.py)
DEFAULT_STRATEGY = SearchConfig.strategy


def rank_function(name: str) -> Rank:
    """The ``rank`` of the strategy ``name``; ValueError for a name not in ``STRATEGIES``."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r} (one of {', '.join(STRATEGIES)})")
    return import_module(f"{__name__}.{name}").rank
