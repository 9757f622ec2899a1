"""Search only (strategies, scoring, context, fallback), no HTTP.

``SEARCH_VERSION`` is the version of the ranking code; ``search_version()`` adds the page scorer's
(``page_scorer.py``), so a figure names the search that made it (``GET /v1/service``, ``kb-assets eval``,
``benchmarks/filings.py``). Bump it when a change of this package changes what a search returns.
"""

SEARCH_VERSION = "2"  # 1: issue 32's filings search; 2: analyses routed, evidence budget, page scorer (issue 44)


def search_version() -> str:
    """The ranking code's version and the page scorer's: "2+scorer:filings-1" ("+scorer:none" without one)."""
    from kb_assets.retrieval.page_scorer import scorer_version

    return f"{SEARCH_VERSION}+scorer:{scorer_version()}"
