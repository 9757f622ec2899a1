"""What every step shares: the failure a step raises for one document, and whether an output is current."""

from __future__ import annotations

import polars as pl

from kb_assets.pipeline.versions import legacy_version
from kb_assets.stores.catalog import Document


class DocumentFailed(Exception):
    """One document cannot go on; the message says why (shown to users as the document's error)."""


def unexpected_failure(doc: Document, error: BaseException) -> str:
    """The reason a document failed for when its step raised what it does not expect (a bug, an outage):
    not a refusal of the document (``DocumentFailed``). ``is_unexpected`` tells them apart."""
    return f"{doc.source_path}: unexpected {type(error).__name__}: {error}"


def is_unexpected(reason: str | None) -> bool:
    """Whether a failure's reason is an unexpected error (``unexpected_failure``; also ``publish.py``'s)."""
    return ": unexpected " in (reason or "")


def made_again(doc: Document) -> dict[str, str | None]:
    """What a step that records its run on a failed document it has just made again (a retry from
    ``raw_files`` or ``parsed_pages``) sets too: pending, so that the run's next steps take it (they skip
    documents that failed in this run) until it publishes or fails again."""
    return {"status": "pending", "error": None, "failed_step": None} if doc.status == "failed" else {}


def version_of(doc: Document) -> str:
    """The document's version (sha256 of its bytes), which the scan that registered it recorded."""
    if doc.version is None:
        raise RuntimeError(f"{doc.source_path}: the catalog has no version of document {doc.document_id}")
    return doc.version


def current(doc: Document, step: str, version: str) -> bool:
    """Whether the document's index records ``step``'s output as made (or confirmed) by ``version``."""
    made_by = (doc.step_versions or {}).get(step)
    return (legacy_version(step, None) if made_by is None else made_by) == version


def same_rows(
    stored: pl.DataFrame, fresh: pl.DataFrame, ignore: tuple[str, ...] = ("run_id", "pipeline_version")
) -> bool:
    """Whether fresh lake rows equal the stored ones but for who made them."""
    if stored.height != fresh.height or not stored.height:
        return False
    return stored.drop(*ignore).equals(fresh.drop(*ignore))
