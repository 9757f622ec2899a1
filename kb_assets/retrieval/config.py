"""How search ranks and how long it waits: the typed settings of the retrieval service."""

from __future__ import annotations

from dataclasses import dataclass

from kb_assets.retrieval.strategies import DEFAULT_STRATEGY


@dataclass(frozen=True)
class Weights:
    """``score = dense * dense_score + lexical * normalized_bm25 + exact_boost`` (DESIGN.md section 6)."""

    dense: float = 0.82                 # KB_DENSE_WEIGHT
    lexical: float = 0.18               # KB_LEXICAL_WEIGHT
    exact_boost: float = 0.05           # KB_EXACT_BOOST: added when the whole query is in the content


@dataclass(frozen=True)
class SearchConfig:
    weights: Weights = Weights()
    strategy: str = DEFAULT_STRATEGY    # KB_SEARCH_STRATEGY: the strategy of requests that name none
    candidates: int = 50                # KB_SEARCH_CANDIDATES: hits asked of each search path per knowledge base
    milvus_timeout_s: float = 5.0       # KB_MILVUS_TIMEOUT_S: every Milvus call of the service
    postgres_timeout_ms: int = 3000     # KB_POSTGRES_TIMEOUT_MS: every Postgres statement of the service
    language_policy: str = "share"      # for queries in a language the model does not read
    pageindex_pages: int = 12           # candidate pages the pageindex strategy searches within
    spec_ttl_s: float = 5.0             # how long the alias -> collection + spec answer is reused
