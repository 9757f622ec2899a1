"""Chunk lineage: chunk -> page(s) -> document version -> stored file, with the runs that wrote them."""

from __future__ import annotations

from pymilvus import MilvusClient

from kb_assets.chunking.text import normalize_ws
from kb_assets.storage.catalog import Catalog
from kb_assets.storage.lake import Lake


class ChunkNotFound(LookupError):
    pass


def chunk_found_in_pages(chunk: dict, page_texts: dict[int, str]) -> bool:
    """The lineage property: content (less a repeated table header) is in the joined text of its pages."""
    content = chunk["content"]
    header = chunk.get("table_header")
    if header and content.startswith(header):
        content = content[len(header):]
    joined = "\n".join(page_texts.get(i, "") for i in range(chunk["page_index"], chunk["page_end"] + 1))
    return normalize_ws(content) in normalize_ws(joined)


def locate_document(chunk_id: str, client: MilvusClient | None, alias: str, lake: Lake) -> str:
    """The document of a chunk: asked of the published collection, else found in the lake."""
    if client is not None:
        try:
            rows = client.get(alias, ids=[chunk_id], output_fields=["document_id"])
            if rows:
                return rows[0]["document_id"]
        except Exception:  # nothing published or Milvus down: the lake still knows
            pass
    for document_id in lake.document_ids("chunks"):
        if chunk_id in lake.read("chunks", document_id)["chunk_id"].to_list():
            return document_id
    raise ChunkNotFound(f"chunk {chunk_id} is in no published document")


def chunk_lineage(chunk_id: str, catalog: Catalog, lake: Lake, client: MilvusClient | None, alias: str) -> dict:
    document_id = locate_document(chunk_id, client, alias, lake)
    chunks = lake.read("chunks", document_id).filter(chunk_id=chunk_id)
    if chunks.is_empty():
        raise ChunkNotFound(f"chunk {chunk_id} is no longer in document {document_id}")
    chunk = chunks.row(0, named=True)
    doc = catalog.get_document(document_id)
    pages = [p for p in catalog.read_pages(document_id)
             if chunk["page_index"] <= p["page_index"] <= chunk["page_end"]]
    found = chunk_found_in_pages(chunk, {p["page_index"]: p["text"] for p in pages})
    same_version = doc is not None and all(p["version"] == chunk["document_version"] for p in pages) \
        and doc.version == chunk["document_version"]
    return {
        "chunkId": chunk_id,
        "chunkIndex": chunk["chunk_index"],
        "content": chunk["content"],
        "sectionTitle": chunk["section_title"],
        "pageIndex": chunk["page_index"],
        "pageEnd": chunk["page_end"],
        "pages": [{"pageIndex": p["page_index"], "pageLabel": p["page_label"], "parser": p["parser"],
                   "mode": p["mode"], "version": p["version"], "runId": p["run_id"]} for p in pages],
        "document": {
            "documentId": document_id,
            "knowledgeBaseId": chunk["knowledge_base_id"],
            "title": chunk["document_title"],
            "sourceUri": chunk["source_uri"],
            "version": chunk["document_version"],
            "currentVersion": doc.version if doc else None,
            "status": doc.status if doc else None,
            "objectKey": doc.object_key if doc else None,
        },
        "runIds": {"chunks": chunk["run_id"], "pages": pages[0]["run_id"] if pages else None,
                   "document": doc.last_run_id if doc else None},
        "verified": bool(found and same_version),
        "verification": {"contentFoundInPages": found, "versionsMatch": same_version},
    }
