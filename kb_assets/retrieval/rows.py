"""Result rows: the fields of one search result (as the API answers them, ``service/schemas.py``), for a
scored chunk or a fallback page, and the ``/v1/assets/...`` URLs of page and figure images."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb_assets.lib.json_types import JsonObject

if TYPE_CHECKING:
    from kb_assets.stores.catalog.search_reads import MatchedPage
    from kb_assets.stores.entities import Entity

# where the service serves page images and figure crops, by object-store key (``pages/<documentId>/...``)
ASSETS_PATH = "/v1/assets"


def asset_url(key: str | None) -> str | None:
    """The service URL of a stored image (None without one)."""
    return f"{ASSETS_PATH}/{key}" if key else None


def result_row(
    entity: Entity, score: float | None, scores: dict[str, float | None], source: str = "hybrid"
) -> JsonObject:
    """A result (as the API answers it) from a Milvus entity (or a page shaped like one); ``pageImageUrl`` is filled
    in later."""
    return {
        "chunkId": entity.get("chunk_id"),
        "documentId": entity["document_id"],
        "knowledgeBaseId": entity["knowledge_base_id"],
        "documentTitle": entity.get("document_title"),
        "sourceUri": entity.get("source_uri"),
        "pageIndex": entity["page_index"],
        "pageEnd": entity.get("page_end", entity["page_index"]),
        "pageLabel": entity.get("page_label") or None,
        "chunkIndex": entity.get("chunk_index"),
        "sectionTitle": entity.get("section_title") or None,
        "content": entity["content"],
        "score": None if score is None else round(float(score), 6),
        "scores": scores,
        "retrievalSource": source,
        "pageImageUrl": None,
        "figureImageUrl": asset_url(entity.get("image_key")),
    }


def page_row(page: MatchedPage) -> JsonObject:
    """A page-fallback result: page text from Postgres, no hybrid score."""
    shaped = {
        "document_id": page.document_id,
        "knowledge_base_id": page.knowledge_base_id,
        "document_title": page.document_title,
        "source_uri": page.source_uri,
        "page_index": page.page_index,
        "page_end": page.page_index,
        "page_label": page.page_label,
        "content": page.text[:2000],
    }
    row = result_row(shaped, None, {"dense": None, "lexical": None, "exactBoost": None}, source="fallback_pages")
    row["pageSummary"] = page.summary
    if page.image_key:
        row["pageImageUrl"] = asset_url(page.image_key)
    return row
