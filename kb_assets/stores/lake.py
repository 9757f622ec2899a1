"""The lake: one Parquet file per table and document partition (polars), local or on S3.

The schemas of the lake tables are declared here, once.
"""

from __future__ import annotations

import io

import polars as pl
from polars.datatypes import DataTypeClass

from kb_assets.stores.paths import root_path, write_atomically

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

_EMBEDDINGS_COLUMNS: dict[str, pl.DataType | DataTypeClass] = {
    "chunk_id": pl.String,
    "document_id": pl.String,
    "embedding_input_sha": pl.String,
    "model": pl.String,
    "dimension": pl.Int32,
    "vector": pl.List(pl.Float32),
    "run_id": pl.String,
    "pipeline_version": pl.String,  # the encoding version that made the vector (with ``model``: the spec)
}
EMBEDDINGS_SCHEMA = pl.Schema(_EMBEDDINGS_COLUMNS)

TABLES = {"chunks": CHUNKS_SCHEMA, "embeddings": EMBEDDINGS_SCHEMA}
# columns added after files were written: what an older file's rows hold for them
ADDED_COLUMNS = {"pipeline_version": "1"}


class Lake:
    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.root = root_path(url, storage_options)

    def _path(self, table: str, document_id: str):
        return self.root / table / f"{document_id}.parquet"

    def write(self, table: str, document_id: str, frame: pl.DataFrame) -> None:
        """Replace one document's rows of a table (validated against the table's schema)."""
        expected = TABLES[table]
        if frame.schema != expected:
            raise ValueError(f"lake table {table}: frame schema {dict(frame.schema)} is not {dict(expected)}")
        buffer = io.BytesIO()
        frame.write_parquet(buffer)
        write_atomically(self._path(table, document_id), buffer.getvalue())

    def read(self, table: str, document_id: str) -> pl.DataFrame:
        """One document's rows, or an empty frame of the table's schema."""
        path = self._path(table, document_id)
        if not path.exists():
            return pl.DataFrame(schema=TABLES[table])
        frame = pl.read_parquet(io.BytesIO(path.read_bytes()))
        schema = TABLES[table]
        # files written before a column was added read with its default (pipeline versions: version 1) or empty
        missing = [
            pl.lit(ADDED_COLUMNS.get(name), dtype).alias(name)
            for name, dtype in schema.items()
            if name not in frame.columns
        ]
        return frame.with_columns(missing).select(list(schema)).cast(schema)

    def exists(self, table: str, document_id: str) -> bool:
        return self._path(table, document_id).exists()

    def delete(self, table: str, document_id: str) -> None:
        path = self._path(table, document_id)
        if path.exists():
            path.unlink()

    def document_ids(self, table: str) -> list[str]:
        folder = self.root / table
        if not folder.exists():
            return []
        return sorted(p.name.removesuffix(".parquet") for p in folder.iterdir() if p.name.endswith(".parquet"))
