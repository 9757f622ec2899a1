"""Result rows: the fields of one search result (as the API answers them, ``service/schemas.py``), for a
scored chunk or a fallback page, and the ``/v1/assets/...`` URLs of page and figure images."""

from __future__ import annotations

# where the service serves page images and figure crops, by object-store key (``pages/<documentId>/...``)
ASSETS_PATH = "/v1/assets"


def asset_url(key: str | None) -> str | None:
    """The service URL of a stored image (None without one)."""
    return f"{ASSETS_PATH}/{key}" if key else None


def result_row(entity: dict, score: float | None, scores: dict, source: str = "hybrid") -> dict:
    """A result from a Milvus entity (or a page shaped like one); ``pageImageUrl`` is filled in later."""
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


def page_row(page: dict) -> dict:
    """A page-fallback result: page text from Postgres, no hybrid score."""
    row = result_row(
        {**page, "content": page["text"][:2000], "page_end": page["page_index"], "image_key": None},
        None,
        {"dense": None, "lexical": None, "exactBoost": None},
        source="fallback_pages",
    )
    row["pageSummary"] = page.get("summary")
    if page.get("image_key"):
        row["pageImageUrl"] = asset_url(page["image_key"])
    return row
