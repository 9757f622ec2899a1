"""The work of each asset for one document, as plain functions over the stores.

Each step is idempotent and skips a document whose output is current: made from the document's
version of the file by the step's current pipeline version (``version``, see ``kb_assets.pipeline.versions``), so a
re-materialization of unchanged content costs nothing. A step that runs again and makes the same output
as before writes nothing and records only that its version confirmed it; a step whose output changed
marks the steps after it stale (their recorded version becomes ""), so they run again. A step that cannot handle a
document raises :class:`DocumentFailed` with the reason; the asset marks that document failed and goes on.


The steps live by asset: ``sources`` (raw_files, parsed_pages), ``structure`` (pageindex_trees), ``chunks``,
``publish`` (embeddings and milvus_collection), ``purge``; ``common`` holds what they share. This package
names them all, as the assets call them (``steps.parse_pages``).
"""

from kb_assets.pipeline.steps.chunks import ChunksRecord, build_chunks, record_chunks, store_chunk_contexts
from kb_assets.pipeline.steps.common import (
    DocumentFailed,
    current,
    is_unexpected,
    made_again,
    same_rows,
    unexpected_failure,
)
from kb_assets.pipeline.steps.publish import (
    embed_and_publish,
    expect_entities,
    publish_document,
    publish_if_unpublished,
)
from kb_assets.pipeline.steps.purge import PurgedDocument, purge_document, purge_documents
from kb_assets.pipeline.steps.sources import PAGE_FIELDS, parse_pages, same_pages, store_raw_file
from kb_assets.pipeline.steps.structure import build_pageindex, pdf_outline, tree_shape

__all__ = [
    "ChunksRecord",
    "DocumentFailed",
    "is_unexpected",
    "unexpected_failure",
    "PAGE_FIELDS",
    "PurgedDocument",
    "build_chunks",
    "build_pageindex",
    "current",
    "embed_and_publish",
    "expect_entities",
    "made_again",
    "parse_pages",
    "pdf_outline",
    "publish_document",
    "publish_if_unpublished",
    "purge_document",
    "record_chunks",
    "purge_documents",
    "same_pages",
    "same_rows",
    "store_chunk_contexts",
    "store_raw_file",
    "tree_shape",
]
