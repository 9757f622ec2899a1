"""The lake table ``chunks``: one row per chunk, as the chunker makes it (the lake stores it as is)."""

from __future__ import annotations

import polars as pl
from polars.datatypes import DataTypeClass

_CHUNKS_COLUMNS: dict[str, pl.DataType | DataTypeClass] = {
    "chunk_id": pl.String,
    "document_id": pl.String,
    "knowledge_base_id": pl.String,
    "document_version": pl.String,
    "document_title": pl.String,
    "source_uri": pl.String,
    "source_kind": pl.String,
    "mime": pl.String,
    "page_index": pl.Int32,
    "page_end": pl.Int32,
    "page_label": pl.String,
    "chunk_index": pl.Int32,
    "kind": pl.String,  # paragraph | heading | list | table | figure | code
    "section_title": pl.String,
    "content": pl.String,  # what users see
    "embedding_input": pl.String,  # content with a locating prefix
    "embedding_input_sha": pl.String,
    "table_header": pl.String,  # header rows repeated into a table chunk (not in the page there)
    "image_key": pl.String,
    "run_id": pl.String,
    "pipeline_version": pl.String,  # the chunker version that made the row (kb_assets.pipeline.versions)
    # the page areas the chunk covers, in the units of pages.width/height (top-left origin); empty
    # for formats without page geometry
    "regions": pl.List(
        pl.Struct({"page_index": pl.Int32, "l": pl.Float32, "t": pl.Float32, "r": pl.Float32, "b": pl.Float32})
    ),
}
CHUNKS_SCHEMA = pl.Schema(_CHUNKS_COLUMNS)
