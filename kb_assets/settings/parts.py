"""The typed parts of the settings: what each part of kb-assets receives, as plain frozen values.

Nothing here reads the environment (``Settings.from_env`` in ``__init__.py`` does) and nothing here
imports a stage: parsing, retrieval and the pipeline read these values, never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# ---- parsing: what a parse may do and how much it may take ----------------------------------------
MAX_FILE_BYTES = 200 * 1024 * 1024  # KB_PARSE_MAX_FILE_BYTES
MAX_PAGES = 5000  # KB_PARSE_MAX_PAGES: PDF pages (and TIFF frames)
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024  # KB_PARSE_MAX_UNPACKED_BYTES: all members of a DOCX/PPTX/XLSX
MAX_IMAGE_PIXELS = 150_000_000  # an image file (or one TIFF frame) larger than this is refused
OCR_ENGINES = ("rapidocr", "tesseract")  # KB_OCR_ENGINE: rapidocr (models in its wheel, the default) or tesseract
OCR_LANGUAGES = "eng+chi_sim"  # KB_OCR_LANGUAGES: tesseract language codes (rapidocr reads its languages at once)


@dataclass(frozen=True)
class ParseOptions:
    max_file_bytes: int = MAX_FILE_BYTES
    max_pages: int = MAX_PAGES
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES
    max_image_pixels: int = MAX_IMAGE_PIXELS
    ocr: bool = True  # OCR pages without a text layer and image files
    ocr_engine: str = OCR_ENGINES[0]
    ocr_languages: str = OCR_LANGUAGES
    images: bool = True  # crop figures (PDF) into their blocks (page images: render.render_page_images)
    tessdata_dir: Path | None = None  # tesseract's language data (TESSDATA_PREFIX); None: Debian's folders
    docling_artifacts_path: Path | None = None  # docling's model folder (DOCLING_ARTIFACTS_PATH)
    scratch_dir: Path | None = None  # where a parse puts its temporary copy of the source; None: the system's
    workers: int = 1  # processes that convert one PDF's page batches (KB_PARSE_WORKERS; 1: this process)


# ---- retrieval: how search ranks and how long it waits ---------------------------------------------
@dataclass(frozen=True)
class Weights:
    """``score = dense * dense_score + lexical * normalized_bm25 + exact_boost`` (docs/retrieval.md, section 1)."""

    dense: float = 0.82  # KB_DENSE_WEIGHT
    lexical: float = 0.18  # KB_LEXICAL_WEIGHT
    exact_boost: float = 0.05  # KB_EXACT_BOOST: added when the whole query is in the content


@dataclass(frozen=True)
class SearchConfig:
    """The retrieval service's settings: the ``KB_*`` ones below, and the ranking's own knobs, which no
    variable sets (``benchmarks/retrieval_quality.py --set FIELD=VALUE`` varies them)."""

    weights: Weights = Weights()
    strategy: str = "pageindex"  # KB_SEARCH_STRATEGY: the strategy of requests that name none
    candidates: int = 50  # KB_SEARCH_CANDIDATES: hits asked of each search path per knowledge base
    milvus_timeout_s: float = 5.0  # KB_MILVUS_TIMEOUT_S: every Milvus call of the service
    postgres_timeout_ms: int = 3000  # KB_POSTGRES_TIMEOUT_MS: every Postgres statement of the service
    language_policy: str = "translate"  # for queries in a language the model does not read (query.py)
    translated_weight: float = 0.5  # translate: the dense share a dictionary-translated word counts for
    translate_bm25: bool = True  # translate: BM25 searches with the dictionary words too
    pageindex_pages: int = 12  # candidate pages the pageindex strategy searches within
    # pageindex on the embedded engine (an exact dense scan): past this many chunks in the knowledge bases
    # searched, the dense search reads the located documents' chunks only (docs/decisions.md, issue 51)
    dense_exact_chunks: int = 100_000
    chunks_per_page: int = 2  # pageindex: at most this many chunks a page gives (never neighbours)
    locate_weight: float = 0.3  # pageindex: weight of a page's locating score for a query ranked
    # lexically (the model does not read it) ...
    locate_weight_read: float = 0.15  # ... and for one the model reads; a query read in part gets a mix
    named_statement: float = 0.3  # pageindex: added to the pages of a statement the question names
    analysis: float = 0.5  # pageindex: x the routing value of the pages an analyst's question routes to (0: off)
    page_scorer: bool = True  # pageindex, filings: the trained page scorer orders the best pages (page_scorer.py)
    bm25_content_words: bool = True  # BM25 gets the query's content words only (lexical_query.py)
    kept_bm25_statistics: bool = True  # candidates' BM25 from the statistics kept in Postgres, not Milvus's
    # (lexical_scores.py; False: Milvus's, to compare)
    rerank_coverage: float = 0.1  # pageindex second stage (rerank.py): weight of the question's words
    rerank_proximity: float = 0.05  # a chunk holds, and of its phrases kept together (0 and 0: off)
    page_coverage: float = 0.3  # pageindex: weight of the share of the question's terms a page's best
    page_coverage_terms: int = 8  # context window holds, for questions of at least this many terms, on
    page_coverage_pages: int = 20  # this many best pages (0: off)
    context_chars: int = 800  # KB_SEARCH_CONTEXT_CHARS: each result's ``context`` (0: none)
    table_context_chars: int = 2000  # KB_SEARCH_TABLE_CONTEXT_CHARS: a table page's or chunk's ``content`` +
    # ``context`` (its head and the rows asked for), and the most any result's may hold (0: context_chars)
    spec_ttl_s: float = 5.0  # how long the alias -> collection + spec answer is reused


# ---- the pipeline: which step versions are current -----------------------------------------------
@dataclass(frozen=True)
class PipelineVersions:
    """Overrides of the steps' code versions (``kb_assets.pipeline.versions``); None: the code's own.
    A test or a benchmark bumps one without editing code:
    ``replace(settings, versions=replace(settings.versions, chunks="2"))``."""

    raw: str | None = None
    parse: str | None = None
    structure: str | None = None
    chunks: str | None = None
    embeddings: str | None = None


# ---- stores and endpoints -------------------------------------------------------------------------
@dataclass(frozen=True)
class S3Settings:
    """Credentials and endpoint of s3:// stores, from the standard ``AWS_*`` variables."""

    access_key_id: str = ""
    secret_access_key: str = ""
    endpoint_url: str = ""  # AWS_ENDPOINT_URL: a non-AWS server (SeaweedFS, MinIO)
    region: str = ""  # AWS_REGION / AWS_DEFAULT_REGION

    def storage_options(self) -> dict:
        """fsspec/s3fs options (used only for s3:// URLs)."""
        options: dict = {}
        if self.access_key_id:
            options.update(key=self.access_key_id, secret=self.secret_access_key)
        if self.endpoint_url:
            options["endpoint_url"] = self.endpoint_url
        if self.region:
            options["client_kwargs"] = {"region_name": self.region}
        return options


@dataclass(frozen=True)
class EndpointSettings:
    """An optional OpenAI-compatible model (the page summarizer, the chunk contextualizer), from
    ``<PREFIX>_URL``, ``_MODEL``, ``_API_KEY`` and ``_TIMEOUT_SECONDS``; unset url or model: not used."""

    url: str = ""  # the API base
    model: str = ""
    api_key: str = ""  # optional
    timeout_seconds: float = 10.0  # per request

    @property
    def configured_model(self) -> str:
        """The model when the endpoint is configured, else ""."""
        return self.model if self.url and self.model else ""
