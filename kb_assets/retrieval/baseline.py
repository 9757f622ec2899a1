"""The naive chunk-RAG baseline the eval set is measured against, built from the same stored pages.

Page texts of a document concatenated, 512-character windows with 50 overlap, the same embedding
model, dense only, exact cosine. Results carry the page range each window spans.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.lib.json_types import JsonObject
from kb_assets.lib.rows import PageRow

WINDOW, OVERLAP = 512, 50


def windows(pages: list[PageRow]) -> list[tuple[str, int, int]]:
    """(text, first page, last page) windows over the concatenated page texts of one document."""
    starts, parts, offset = [], [], 0
    for page in sorted(pages, key=lambda p: p["page_index"]):
        starts.append(offset)
        parts.append(page["text"])
        offset += len(page["text"]) + 1
    text = "\n".join(parts)
    indexes = [p["page_index"] for p in sorted(pages, key=lambda p: p["page_index"])]
    out = []
    for start in range(0, max(1, len(text) - OVERLAP), WINDOW - OVERLAP):
        piece = text[start : start + WINDOW]
        if piece.strip():
            first = indexes[bisect_right(starts, start) - 1]
            last = indexes[bisect_right(starts, min(len(text) - 1, start + len(piece) - 1)) - 1]
            out.append((piece, first, last))
    return out


class NaiveBaseline:
    """Dense-only exact search over 512-character windows of the given documents (each its ``knowledgeBaseId`` and
    ``sourceUri``, and its pages)."""

    def __init__(self, model: EmbeddingModel, documents: list[tuple[dict[str, str], list[PageRow]]]):
        self.rows: list[JsonObject] = []
        texts = []
        for doc, pages in documents:
            for text, first, last in windows(pages):
                texts.append(text)
                self.rows.append(
                    {
                        "knowledgeBaseId": doc["knowledgeBaseId"],
                        "sourceUri": doc["sourceUri"],
                        "pageIndex": first,
                        "pageEnd": last,
                        "content": text,
                    }
                )
        self.model = model
        self.vectors = model.encode(texts) if texts else np.zeros((0, model.dimension), dtype=np.float32)
        self.kb = np.array([row["knowledgeBaseId"] for row in self.rows])

    def search(self, query: str, knowledge_base_ids: list[str] | None, limit: int = 10) -> list[JsonObject]:
        """The ``limit`` windows nearest the query, as result rows (the fields ``evaluation.py`` reads)."""
        scores = self.vectors @ self.model.encode_queries([query])[0]
        if knowledge_base_ids:
            scores = np.where(np.isin(self.kb, knowledge_base_ids), scores, -np.inf)
        order = np.argsort(-scores)[:limit]
        return [{**self.rows[i], "score": float(scores[i])} for i in order if np.isfinite(scores[i])]
