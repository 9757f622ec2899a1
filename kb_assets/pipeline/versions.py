"""Pipeline versions: which code made each step's stored output, and from which step a document is stale.

Each step of the asset graph has a version: a constant beside the code it versions
(``parsing.PARSER_VERSION``: parsing and the layout pass; ``structure.STRUCTURE_VERSION``: the tree
builder and the rule-based summarizer, plus the configured LLM summarizer; ``chunking.CHUNKER_VERSION``
plus the configured chunk contextualizer; ``embedding.EMBEDDING_VERSION`` plus the configured embedding
model: the embedding spec;
``stores.vectors.SCHEMA_VERSION`` plus the model: the collection). Dagster gets them as the assets'
``code_version``; each step records its version on what it writes (``pages.pipeline_version``,
``pageindex_nodes.pipeline_version``, the lake's ``chunks`` and ``embeddings`` rows) and in the
document's index ``documents.step_versions`` (a step that rewrote its output with a different result
sets the entries of the steps after it to "", made from older input), which the planner reads; a missing
entry is an output made before versions were recorded (version 1).

A document is stale from the first step whose recorded version is not the current one; ingest, the
sensor and the schedule re-materialize it from there. A different embedding model or collection schema
makes every document stale from ``embeddings``: that is a collection migration (``kb_assets.pipeline.migration``).

Settings may override them (``Settings.versions``: None is the code's version), so a test or a benchmark bumps
one without editing code: ``replace(settings, versions=replace(settings.versions, chunks="2"))``;
``step_versions(settings)`` is what is current.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_assets.chunking import CHUNKER_VERSION
from kb_assets.embedding import EMBEDDING_VERSION
from kb_assets.lib.json_types import JsonObject
from kb_assets.parsing import PARSER_VERSION
from kb_assets.settings import Settings
from kb_assets.structure import STRUCTURE_VERSION

STEPS = ("raw_files", "parsed_pages", "pageindex_trees", "chunks", "embeddings", "milvus_collection")
# what each step's version versions, for people
WHAT = {
    "raw_files": "raw file store",
    "parsed_pages": "parser",
    "pageindex_trees": "tree builder/summarizer",
    "chunks": "chunker",
    "embeddings": "embedding spec",
    "milvus_collection": "collection schema",
}
# outputs made before versions were recorded count as version 1 of their step
BASELINE = "1"


def step_versions(settings: Settings) -> dict[str, str]:
    """The current version of every step: the code's versions (or the settings' overrides) plus the
    configured models."""
    from kb_assets.stores.vectors import SCHEMA_VERSION  # pymilvus: imported only where collections matter

    override, model = settings.versions, settings.embedding_model
    summarizer, context = settings.summarizer.configured_model, settings.chunk_context.configured_model
    return {
        "raw_files": override.raw or BASELINE,
        "parsed_pages": override.parse or PARSER_VERSION,
        "pageindex_trees": (override.structure or STRUCTURE_VERSION) + (f"+llm:{summarizer}" if summarizer else ""),
        # a partly contextualized document records another version: see partly_contextualized
        "chunks": (override.chunks or CHUNKER_VERSION) + (f"+context:{context}" if context else ""),
        "embeddings": f"{override.embeddings or EMBEDDING_VERSION}:{model}",
        "milvus_collection": f"{SCHEMA_VERSION}:{model}",
    }


def partly_contextualized(chunks_version: str) -> str:
    """What a document's chunks are recorded as when a failing contextualizer left some of them without
    their sentence: never a current version, so the next run retries them (or, with the contextualizer
    turned off since, re-chunks them plain)."""
    return f"{chunks_version}:partial"


def after(step: str) -> tuple[str, ...]:
    """The steps downstream of ``step``."""
    return STEPS[STEPS.index(step) + 1 :]


def from_step(step: str) -> tuple[str, ...]:
    """``step`` and the steps downstream of it: the selection of a run that starts there."""
    return STEPS[STEPS.index(step) :]


def selection(step: str) -> tuple[str, ...] | None:
    """The asset selection of a run that starts at ``step``: every asset from raw_files (None, so
    ``page_images`` too), else the step and those after it (a page still without a render after a
    re-parse is rendered on its first request)."""
    return None if step == "raw_files" else from_step(step)


def model_of(version: str | None) -> str | None:
    """The embedding model part of an ``embeddings`` or ``milvus_collection`` version."""
    return version.split(":", 1)[1] if version and ":" in version else None


@dataclass(frozen=True)
class Staleness:
    """Why a document must be (re-)materialized, and from which step."""

    step: str
    reason: str
    failed: bool = False  # a failure that stands: the step's version is the one that failed
    migration: bool = False  # stale only because the embedding model or the collection schema changed

    def as_json(self) -> JsonObject:
        return {"step": self.step, "reason": self.reason, "failed": self.failed, "migration": self.migration}


def staleness(doc, current: dict[str, str], legacy_model: str | None = None) -> Staleness | None:
    """From which step ``doc`` (a catalog ``Document``) must run again under the ``current`` versions;
    None when every stored output is current. ``legacy_model``: the embedding model of the document's
    collection, for documents published before versions were recorded."""
    if doc.status == "deleted":
        return None
    if doc.status == "pending":
        return Staleness(
            "raw_files", "new or changed file" if doc.version != doc.published_version else "a run did not finish"
        )
    if doc.status == "failed":
        step, _, version = (doc.failed_step or "raw_files@").partition("@")
        step = step if step in STEPS else "raw_files"
        if version and version != current[step]:
            return Staleness(step, f"failed under {WHAT[step]} {version}; now {current[step]}: retry")
        return Staleness(step, f"failed: {doc.error or 'unknown reason'}", failed=True)
    recorded = doc.step_versions or {}
    for step in STEPS:
        made_by = recorded.get(step)
        made_by = legacy_version(step, legacy_model) if made_by is None else made_by
        if made_by == "":
            return Staleness(step, f"{WHAT[step]}: its input changed since it ran (a run did not finish)")
        if made_by != current[step]:
            migration = (
                step in ("embeddings", "milvus_collection")
                and made_by is not None
                and (model_of(made_by) != model_of(current[step]) or step == "milvus_collection")
            )
            return Staleness(step, f"{WHAT[step]} {made_by or 'unknown'} -> {current[step]}", migration=migration)
    if doc.published_version and doc.term_count is None:
        return Staleness("milvus_collection", "no BM25 statistics kept for what serves (published before they were)")
    return None


def legacy_version(step: str, model: str | None) -> str | None:
    """The version of an output made before versions were recorded (version 1 of its step)."""
    if step in ("embeddings", "milvus_collection"):
        return f"{BASELINE}:{model}" if model else None
    return BASELINE
