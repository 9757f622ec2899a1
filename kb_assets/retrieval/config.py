"""How search ranks and how long it waits: the typed settings of the retrieval service."""

from __future__ import annotations

from dataclasses import dataclass

from kb_assets.retrieval.strategies import DEFAULT_STRATEGY


@dataclass(frozen=True)
class Weights:
    """``score = dense * dense_score + lexical * normalized_bm25 + exact_boost`` (docs/retrieval.md, section 1)."""

    dense: float = 0.82  # KB_DENSE_WEIGHT
    lexical: float = 0.18  # KB_LEXICAL_WEIGHT
    exact_boost: float = 0.05  # KB_EXACT_BOOST: added when the whole query is in the content


@dataclass(frozen=True)
class SearchConfig:
    weights: Weights = Weights()
    strategy: str = DEFAULT_STRATEGY  # KB_SEARCH_STRATEGY: the strategy of requests that name none
    candidates: int = 50  # KB_SEARCH_CANDIDATES: hits asked of each search path per knowledge base
    milvus_timeout_s: float = 5.0  # KB_MILVUS_TIMEOUT_S: every Milvus call of the service
    postgres_timeout_ms: int = 3000  # KB_POSTGRES_TIMEOUT_MS: every Postgres statement of the service
    language_policy: str = "translate"  # for queries in a language the model does not read (query.py)
    translated_weight: float = 0.5  # translate: the dense share a dictionary-translated word counts for
    translate_bm25: bool = True  # translate: BM25 searches with the dictionary words too
    pageindex_pages: int = 12  # candidate pages the pageindex strategy searches within
    chunks_per_page: int = 2  # pageindex: at most this many chunks a page gives (never neighbours)
    locate_weight: float = 0.3  # pageindex: weight of a page's locating score for a query ranked
    # lexically (the model does not read it) ...
    locate_weight_read: float = 0.15  # ... and for one the model reads; a query read in part gets a mix
    named_statement: float = 0.3  # pageindex: added to the pages of a statement the question names
    bm25_content_words: bool = True  # BM25 gets the query's content words only (lexical_query.py)
    kept_bm25_statistics: bool = True  # candidates' BM25 from the statistics kept in Postgres, not Milvus's
    # (lexical_scores.py; False: Milvus's, to compare)
    rerank_coverage: float = 0.1  # pageindex second stage (rerank.py): weight of the question's words
    rerank_proximity: float = 0.05  # a chunk holds, and of its phrases kept together (0 and 0: off)
    page_coverage: float = 0.3  # pageindex: weight of the share of the question's terms a page's best
    page_coverage_terms: int = 8  # context window holds, for questions of at least this many terms, on
    page_coverage_pages: int = 20  # this many best pages (0: off)
    context_chars: int = 800  # KB_SEARCH_CONTEXT_CHARS: each result's ``context`` (0: none)
    table_context_chars: int = 0  # KB_SEARCH_TABLE_CONTEXT_CHARS: a statement table's ``context`` (rows and
    # headers; filings: 2000); 0: context_chars, as the house goal of <= 800 characters a result wants
    spec_ttl_s: float = 5.0  # how long the alias -> collection + spec answer is reused
