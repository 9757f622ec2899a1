"""Dagster's view of the stores: one resource, ``stores``, the same :class:`kb_assets.stores.Stores` that
the command line, the service and the sensors use, built from the same Settings: there is one path from
settings to every client (``kb_assets/stores/__init__.py``).

Assets and ops take it as ``stores: StoresResource``. Its description, which the Dagster UI shows, names
where each store is and how the encoder runs; secrets appear by variable name only.
"""

from __future__ import annotations

import dagster as dg

from kb_assets.settings import Settings
from kb_assets.stores import Stores

StoresResource = dg.ResourceParam[Stores]


def describe(settings: Settings) -> str:
    """What the stores resource is configured with, for the UI (no secret values)."""
    s, parse = settings, settings.parse
    lines = [
        f"Postgres: {'KB_POSTGRES_URL (set)' if s.postgres_url else f'embedded under {s.home}'}",
        f"Milvus: {s.milvus_uri or f'embedded Milvus Lite under {s.home}'}, alias {s.alias}, "
        f"dense index {s.milvus_dense_index}",
        f"objects: {s.object_store_url}",
        f"lake: {s.lake_url}",
        f"S3: endpoint {s.s3.endpoint_url or 'AWS'}, credentials "
        f"{'AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (set)' if s.s3.access_key_id else 'none'}",
        f"encoder: {s.embedding_model} on {s.encoder}, {s.encoder_threads} threads, batch {s.embedding_batch_size}, "
        f"slice {s.embedding_slice}, at most {s.max_chunks_per_document} chunks a document",
        f"parsing: {parse.workers} workers, OCR {parse.ocr_engine} ({parse.ocr_languages}), at most "
        f"{parse.max_file_bytes} bytes and {parse.max_pages} pages a file",
        f"summarizer: {s.summarizer.configured_model or 'rule-based'}; chunk context: "
        f"{s.chunk_context.configured_model or 'off'}",
    ]
    return "\n".join(lines)


def build_resources(settings: Settings) -> dict[str, dg.ResourceDefinition]:
    return {"stores": dg.ResourceDefinition.hardcoded_resource(Stores(settings), description=describe(settings))}
