"""The request and answer models of the HTTP service (OpenAPI at ``/docs``); field names are camelCase as
in the README's API section. Text that is not valid Unicode or holds NUL is refused (422)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, StringConstraints

from kb_assets.retrieval.scope import check_period
from kb_assets.retrieval.strategies import STRATEGIES
from kb_assets.service.errors import valid_text

# the strategy names of the registry: validated, and listed in OpenAPI
StrategyName = Literal[STRATEGIES]  # type: ignore[valid-type]
KnowledgeBaseId = Annotated[
    str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$"), AfterValidator(valid_text)
]
QueryText = Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(valid_text)]
MetadataText = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(valid_text)]
PeriodText = Annotated[MetadataText, AfterValidator(check_period)]


class SearchBody(BaseModel):
    query: QueryText
    knowledgeBaseIds: list[KnowledgeBaseId] | None = Field(
        None, max_length=100, description="Knowledge bases to search; none: every one the caller may read."
    )
    limit: int = Field(10, ge=1, le=100)
    minScore: float | None = Field(
        None, allow_inf_nan=False, description="Drop hybrid results below this score (then no page fallback)."
    )
    strategy: StrategyName | None = Field(None, description="None: the configured default.")
    period: PeriodText | None = Field(None, description='Only documents of this period: "FY2022", "Q2 FY2023", a date.')
    kind: MetadataText | None = Field(
        None, description='Only documents of this kind: "annual report", "10-Q", "manual".'
    )
    organisation: MetadataText | None = Field(None, description="Only documents whose organisation's name holds this.")


class Scores(BaseModel):
    dense: float | None
    lexical: float | None
    exactBoost: float | None
    coverage: float | None = Field(
        None, description="pageindex second stage: share of the question's words the chunk holds"
    )
    proximity: float | None = Field(None, description="pageindex second stage: share of its phrases kept together")
    rerank: float | None = Field(
        None, description="pageindex second stage: score + the weighted parts above (its order)"
    )
    pageCoverage: float | None = Field(
        None,
        description="pageindex, long questions: weighted share of the question's "
        "terms the page's best context window holds",
    )


class SearchResult(BaseModel):
    chunkId: str | None
    documentId: str
    knowledgeBaseId: str
    documentTitle: str | None
    sourceUri: str | None
    pageIndex: int
    pageEnd: int
    pageLabel: str | None = None
    chunkIndex: int | None
    sectionTitle: str | None
    content: str
    context: str | None = Field(
        None,
        description=(
            "The passage of the result's page around its chunk, which holds the whole chunk (at most "
            "KB_SEARCH_CONTEXT_CHARS characters, default 800): what a RAG client should read. Null for "
            "fallback rows and when KB_SEARCH_CONTEXT_CHARS=0."
        ),
    )
    score: float | None = Field(description="null for fallback rows")
    scores: Scores
    retrievalSource: Literal["hybrid", "fallback_pages"]
    pageImageUrl: str | None = Field(None, description="a short-lived signed URL of the page image")
    figureImageUrl: str | None = Field(None, description="a short-lived signed URL of the figure image")
    fileUrl: str | None = Field(
        None, description="a short-lived signed URL of the document's original file (inline, its published version)"
    )
    pageSummary: str | None = None
    documentMetadata: dict | None = Field(
        None, description="title, organisation, kind, period, date and confidences, read from the document's content"
    )
    versionNotice: str | None = Field(
        None,
        description=(
            "set when the document's current file failed or is being ingested: the result comes from its "
            "last good (published) version"
        ),
    )


class Timings(BaseModel):
    """Milliseconds each stage of the search took (0: not run for this request); stages run in parallel
    overlap, ``total`` is the wall time (``kb_assets.retrieval.request.STAGES``)."""

    queryEncoding: float = Field(description="the model reads the query")
    locate: float = Field(description="pageindex: pages located by titles, summaries and keywords (Postgres)")
    denseSearch: float = Field(description="Milvus dense searches, summed")
    bm25Search: float = Field(description="Milvus BM25 searches (knowledge base; located pages kept no ranges for)")
    locatedChunks: float = Field(description="pageindex: the located pages' chunks (kept term counts, Milvus by id)")
    versions: float = Field(description="the candidates' published versions (Postgres)")
    lexicalStatistics: float = Field(description="BM25 statistics and candidates' term counts (Postgres)")
    fusion: float = Field(description="hybrid scores of the candidates")
    rerank: float = Field(description="pageindex second stage")
    pageCoverage: float = Field(description="pageindex, long questions: the best pages read and scored")
    pageScore: float = Field(0.0, description="pageindex, filings: the best pages ordered by the trained page scorer")
    pageFacts: float = Field(description="the results' pages: images, table-of-contents marks, texts (Postgres)")
    context: float = Field(description="each result's context passage chosen")
    other: float = Field(
        0.0,
        description="total less the stages' critical path: on a process's first search, loading the model and "
        "the collection; else the published collection read, scoping, waits for a worker",
    )
    total: float


class SearchAnswer(BaseModel):
    results: list[SearchResult]
    warnings: list[str]
    timingsMs: Timings | None = Field(None, description="where the time of this search went, by stage")


class KnowledgeBase(BaseModel):
    knowledgeBaseId: str
    documents: int = Field(description="documents not deleted")
    published: int
    failed: int
    pending: int


class KnowledgeBases(BaseModel):
    knowledgeBases: list[KnowledgeBase]


class DocumentRow(BaseModel):
    documentId: str
    knowledgeBaseId: str
    sourcePath: str
    sourceUri: str
    title: str | None
    version: str | None
    sizeBytes: int | None
    mime: str | None
    sourceKind: str | None
    status: Literal["pending", "published", "failed", "deleted"]
    error: str | None = Field(description="why the document failed")
    pages: int | None
    chunks: int | None
    lastRunId: str | None
    lastRunUrl: str | None = Field(None, description="the run in the Dagster UI (KB_DAGSTER_URL)")
    updatedAt: str | None
    metadata: dict | None = Field(
        None, description="title, organisation, kind, period, date and confidences, read from the document's content"
    )


class Documents(BaseModel):
    documents: list[DocumentRow]


class ServiceInfo(BaseModel):
    strategies: list[str]
    defaultStrategy: str
    dagsterUrl: str | None
    signedUrlSeconds: int
    searchVersion: str = Field(description="the ranking code's version and its page scorer's: 2+scorer:filings-1")


class ChunkRow(BaseModel):
    chunkId: str
    chunkIndex: int
    pageIndex: int = Field(description="0-based, as in search results")
    pageEnd: int
    pageLabel: str | None
    sectionTitle: str | None
    kind: str
    content: str


class DocumentChunks(BaseModel):
    document: DocumentRow
    fileUrl: str = Field(description="a short-lived signed URL of the original file")
    version: str | None = Field(description="the file version the chunks were made from")
    published: bool = Field(description="whether that version is the one search serves")
    chunks: list[ChunkRow] = Field(description="in page order")
