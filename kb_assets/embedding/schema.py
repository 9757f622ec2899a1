"""The lake table ``embeddings``: one vector per chunk, as the encoder makes it (the lake stores it as is)."""

from __future__ import annotations

import polars as pl
from polars.datatypes import DataTypeClass

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
