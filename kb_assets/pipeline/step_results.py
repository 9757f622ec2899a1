"""What each step returns for one document, and where a publishing step writes: small frozen values.

Every result says whether the step skipped the document (its output was current) or made it again the
same (``unchanged``: nothing rewritten after it), and carries the step's own figures, which the asset
reports per partition (``figures``) and sums for the run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from pymilvus import MilvusClient

from kb_assets.embedding.model import EmbeddingModel
from kb_assets.stores.entities import EntityCounts

if TYPE_CHECKING:
    import polars as pl

Figure = int | float | str
NOT_FIGURES = ("skipped", "unchanged", "warnings", "version")


@dataclass(frozen=True, kw_only=True)
class StepResult:
    skipped: bool = False  # the output was current: nothing done
    unchanged: bool = False  # made again, the same as before: nothing rewritten after it
    warnings: tuple[str, ...] = ()

    def figures(self) -> dict[str, Figure]:
        """The step's own figures for the partition's metadata (its counts, parser mode, tree source, ...)."""
        return {
            f.name: value
            for f in dataclasses.fields(self)
            if f.name not in NOT_FIGURES and isinstance(value := getattr(self, f.name), int | float | str)
        }


@dataclass(frozen=True, kw_only=True)
class StoredFile(StepResult):
    """raw_files: the original's bytes stored under their sha256 (the document version)."""

    version: str
    bytes: int


@dataclass(frozen=True, kw_only=True)
class ParsedPages(StepResult):
    """parsed_pages: the pages parsed (or found current), the parse mode of the first and of all pages."""

    pages: int
    mode: str
    modes: dict[str, int] = field(default_factory=dict)  # pages by parse mode
    images: int = 0  # figure crops stored


@dataclass(frozen=True, kw_only=True)
class BuiltTree(StepResult):
    """pageindex_trees: the tree's nodes, where it came from, the table-of-contents pages, the metadata read."""

    nodes: int
    depth: int = 0
    source: str = ""  # outline, toc, headings or page groups
    toc_pages: int = 0
    summaries_computed: int = 0


@dataclass(frozen=True, kw_only=True)
class BuiltChunks(StepResult):
    """chunks: how many, and whether the rule-based fallback made them (its reason)."""

    chunks: int
    fallback: str | None = None
    contextualized: int = 0  # chunks a contextualizer situated
    contexts_written: int = 0  # its sentences newly cached


@dataclass(frozen=True, kw_only=True)
class Published:
    """milvus_collection: what publishing a document wrote into its collection and recorded."""

    skipped: bool  # nothing to write: the collection held the document's current version
    written: int = 0
    deleted: int = 0
    kept: int = 0
    entities: int = 0
    also_written: int = 0  # into a migration's published collection too
    terms_kept: int = 0  # chunks whose BM25 term counts were stored
    note: str = ""

    @classmethod
    def of(cls, counts: EntityCounts, *, skipped: bool, entities: int | None = None, terms_kept: int = 0) -> Published:
        return cls(
            skipped=skipped,
            written=counts.get("written", 0),
            deleted=counts.get("deleted", 0),
            kept=counts.get("kept", 0),
            entities=counts.get("entities", 0) if entities is None else entities,
            also_written=counts.get("alsoWritten", 0),
            terms_kept=terms_kept,
            note=counts.get("note", ""),
        )


@dataclass(frozen=True, kw_only=True)
class Embedded(StepResult):
    """embeddings (and milvus_collection, in the same step): vectors encoded and reused; what was published
    (None: not published by this step)."""

    embedded: int
    reused: int
    published: Published | None = None

    def figures(self) -> dict[str, Figure]:
        mine = super().figures()
        if self.published is not None:
            mine.update({k: v for k, v in dataclasses.asdict(self.published).items() if k != "skipped" and v != ""})
        return mine

    @property
    def republished(self) -> bool:
        """Written into the collection by this step (not skipped as current there)."""
        return self.published is not None and not self.published.skipped


@dataclass(frozen=True, kw_only=True)
class RenderedImages(StepResult):
    """page_images: pages rendered now, and those whose image was there already."""

    rendered: int = 0
    present: int = 0


class Written(TypedDict, total=False):
    """What ``publish.write_entities`` wrote of a document, for ``publish.record_published``."""

    skipped: bool  # nothing to write (``record``: record the step all the same)
    record: bool
    chunks: pl.DataFrame  # the chunk rows written, of the version ``serving``
    serving: str
    counts: EntityCounts


class Serving(NamedTuple):
    """While a migration is due: the published collection of the previous spec and its model, which changed
    documents are written into too."""

    collection: str
    model: EmbeddingModel


class Target(NamedTuple):
    """The collection a publishing step writes into, and its client."""

    client: MilvusClient
    collection: str


@dataclass(frozen=True)
class Publication:
    """Where a run publishes: the configured spec's collection and, while a migration is due, the one that
    serves too."""

    target: Target
    also: Serving | None = None
