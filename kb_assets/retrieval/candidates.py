"""What a search's candidates need of the catalog, read once (``Catalog.candidate_rows``), and which of them may
serve: only entities of a document's published version (a half-written new version of a killed run, or a
version that failed, never reaches a result); a document whose newer file failed while its last good version
serves is recorded for its results' ``versionNotice``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kb_assets.lib.lexical import query_terms as bm25_terms
from kb_assets.retrieval.fanout import Found
from kb_assets.retrieval.query import Query
from kb_assets.retrieval.request import SearchResponse, short
from kb_assets.settings import SearchConfig
from kb_assets.stores.catalog import Catalog
from kb_assets.stores.catalog.search_reads import CandidateRows, ServingVersion


def candidate_rows(
    catalog: Catalog,
    config: SearchConfig,
    response: SearchResponse,
    query: Query,
    found: Found,
    pages: Sequence[tuple[str, int]] = (),
) -> CandidateRows | None:
    """One catalog read for the candidates (``Catalog.candidate_rows``); None, with a warning, without Postgres.
    BM25 statistics already read this search (the located pages', ``located.py``) are not read again."""
    hits = found.hits.values()
    if not hits and not pages:
        return None
    terms = sorted(set(bm25_terms(query.bm25_text or query.text))) if config.kept_bm25_statistics else []
    kbs = {hit["knowledge_base_id"] for hit in hits}
    known = response.statistics_for(kbs, terms)
    wanted = {(hit["document_id"], hit["page_index"]) for hit in hits} | set(pages)
    try:
        rows = catalog.candidate_rows(
            [hit["document_id"] for hit in hits],
            list(found.hits) if terms else [],
            terms,
            [] if known is not None else sorted(kbs),
            sorted(wanted - response.pages.keys()),
        )
    except Exception as error:
        response.warnings.append(f"document versions unverified ({type(error).__name__}: {short(error)})")
        return None
    for key, facts in rows.pages.items():
        response.pages.setdefault(key, facts)
    return replace(rows, statistics=known) if known is not None else rows


def served(response: SearchResponse, found: Found, rows: CandidateRows | None) -> Found:
    """The candidates of each document's published version only (``rows.versions``); records the documents
    whose last good version serves. Without the rows (Postgres) the candidates stay (warned already)."""
    if rows is None or not found.hits:
        return found
    versions = rows.versions
    for document_id, row in versions.items():
        if row.published_version and row.published_version != row.version:
            response.last_good[document_id] = (
                f"the current file of {document_id} failed ({row.error}): results come from its last good "
                f"version {row.published_version[:12]}"
                if row.status == "failed"
                else f"a new version of {document_id} is being ingested: results come from its published version "
                f"{row.published_version[:12]}"
            )
    return found.only(
        {
            chunk_id
            for chunk_id, hit in found.hits.items()
            if _published(versions, hit["document_id"]) == hit.get("document_version")
        }
    )


def _published(versions: dict[str, ServingVersion], document_id: str) -> str | None:
    """The version of the document that may serve (None: none, or its row unread)."""
    row = versions.get(document_id)
    return row.published_version if row is not None else None
