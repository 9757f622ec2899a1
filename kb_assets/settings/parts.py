"""The typed parts of the settings: what each part of kb-assets receives, as plain frozen values.

Nothing here reads the environment (``Settings.from_env`` in ``__init__.py`` does) and nothing here
imports a stage: parsing, retrieval and the pipeline read these values, never the other way round. A
field declared with ``setting(...)`` is a setting (``declare.py``: its variable, description, secret or
not); a plain field is a knob no variable sets (``SearchConfig``'s ranking, ``ParseOptions.scratch_dir``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb_assets.settings.declare import part, setting, shared_cores

StorageOptions = dict[str, Any]  # fsspec/s3fs keyword options of s3:// stores and sources, passed through

# ---- parsing: what a parse may do and how much it may take ----------------------------------------
MAX_FILE_BYTES = 200 * 1024 * 1024  # KB_PARSE_MAX_FILE_BYTES
MAX_PAGES = 5000  # KB_PARSE_MAX_PAGES: PDF pages (and TIFF frames)
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024  # KB_PARSE_MAX_UNPACKED_BYTES: all members of a DOCX/PPTX/XLSX
MAX_IMAGE_PIXELS = 150_000_000  # an image file (or one TIFF frame) larger than this is refused
OCR_ENGINES = ("rapidocr", "tesseract")  # KB_OCR_ENGINE: rapidocr (models in its wheel, the default) or tesseract
OCR_LANGUAGES = "eng+chi_sim"  # KB_OCR_LANGUAGES: tesseract language codes (rapidocr reads its languages at once)


@dataclass(frozen=True)
class ParseOptions:
    max_file_bytes: int = setting(MAX_FILE_BYTES, "KB_PARSE_MAX_FILE_BYTES", "a larger file fails")
    max_pages: int = setting(MAX_PAGES, "KB_PARSE_MAX_PAGES", "a PDF with more pages (a TIFF with more frames) fails")
    max_unpacked_bytes: int = setting(
        MAX_UNPACKED_BYTES, "KB_PARSE_MAX_UNPACKED_BYTES", "all members of a DOCX/PPTX/XLSX together: a bomb fails"
    )
    max_image_pixels: int = setting(MAX_IMAGE_PIXELS, None, "an image file (or one TIFF frame) larger than this fails")
    ocr: bool = setting(True, None, "OCR pages without a text layer and image files")
    ocr_engine: str = setting(
        OCR_ENGINES[0],
        "KB_OCR_ENGINE",
        "`rapidocr` (its models ship in its wheel; reads Chinese, Japanese and Latin scripts at once) or "
        "`tesseract` (faster, less accurate; needs the `tesseract` extra and Debian's language data)",
        choices=OCR_ENGINES,
    )
    ocr_languages: str = setting(OCR_LANGUAGES, "KB_OCR_LANGUAGES", "tesseract's language codes")
    images: bool = setting(True, None, "crop PDF figures into their blocks (page images render apart)")
    tessdata_dir: Path | None = setting(
        None, "TESSDATA_PREFIX", "tesseract's language data", shown_default="Debian's folders"
    )
    docling_artifacts_path: Path | None = setting(
        None, "DOCLING_ARTIFACTS_PATH", "docling's layout and table models: PDFs then use `docling-layout`"
    )
    scratch_dir: Path | None = None  # where a parse puts its temporary copy of the source; None: the system's
    workers: int = setting(
        1,
        "KB_PARSE_WORKERS",
        "processes that parse one PDF's page batches (1: in the run's own process)",
        read=shared_cores,
        shown_default="cores / `KB_CONCURRENT_RUNS`",
    )


# ---- retrieval: how search ranks and how long it waits ---------------------------------------------
@dataclass(frozen=True)
class Weights:
    """``score = dense * dense_score + lexical * normalized_bm25 + exact_boost`` (docs/retrieval.md, section 1)."""

    dense: float = setting(0.82, "KB_DENSE_WEIGHT", "the hybrid score's weight of the dense (vector) score")
    lexical: float = setting(0.18, "KB_LEXICAL_WEIGHT", "the hybrid score's weight of the normalized BM25 score")
    exact_boost: float = setting(0.05, "KB_EXACT_BOOST", "added when the whole query is in the content")


@dataclass(frozen=True)
class SearchConfig:
    """The retrieval service's settings: the ``KB_*`` ones below, and the ranking's own knobs, which no
    variable sets (``benchmarks/retrieval_quality.py --set FIELD=VALUE`` varies them)."""

    weights: Weights = part(Weights())
    strategy: str = setting(
        "pageindex", "KB_SEARCH_STRATEGY", "the strategy of requests that name none: `pageindex` or `hybrid`"
    )
    candidates: int = setting(50, "KB_SEARCH_CANDIDATES", "hits asked of each search path per knowledge base")
    milvus_timeout_s: float = setting(5.0, "KB_MILVUS_TIMEOUT_S", "every Milvus call of the service (seconds)")
    postgres_timeout_ms: int = setting(3000, "KB_POSTGRES_TIMEOUT_MS", "every Postgres statement of the service")
    language_policy: str = "translate"  # for queries in a language the model does not read (query.py)
    translated_weight: float = 0.5  # translate: the dense share a dictionary-translated word counts for
    translate_bm25: bool = True  # translate: BM25 searches with the dictionary words too
    pageindex_pages: int = 12  # candidate pages the pageindex strategy searches within
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
    context_chars: int = setting(800, "KB_SEARCH_CONTEXT_CHARS", "each result's `context` (`0`: none)")
    table_context_chars: int = setting(
        2000,
        "KB_SEARCH_TABLE_CONTEXT_CHARS",
        "on a page that is a table of figures (a statement) a result's `content` + `context` (its head with the "
        "column periods, then the rows asked for), and the most any result's may hold (`0`: the former)",
    )
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

    access_key_id: str = setting("", "AWS_ACCESS_KEY_ID", "S3 credentials", secret=True)
    secret_access_key: str = setting("", "AWS_SECRET_ACCESS_KEY", "S3 credentials", secret=True)
    endpoint_url: str = setting(
        "", "AWS_ENDPOINT_URL", "a non-AWS S3 server (SeaweedFS, MinIO)", fallback=("AWS_ENDPOINT_URL_S3",)
    )
    region: str = setting("", "AWS_REGION", "the S3 region", fallback=("AWS_DEFAULT_REGION",))

    def storage_options(self) -> StorageOptions:
        """fsspec/s3fs options (used only for s3:// URLs)."""
        options: StorageOptions = {}
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

    url: str = setting("", "{prefix}_URL", "the API base (`http://host/v1`); unset: not used")
    model: str = setting("", "{prefix}_MODEL", "the model the endpoint serves")
    api_key: str = setting("", "{prefix}_API_KEY", "sent as a Bearer token (optional)", secret=True)
    timeout_seconds: float = setting(10.0, "{prefix}_TIMEOUT_SECONDS", "of each request")

    @property
    def configured_model(self) -> str:
        """The model when the endpoint is configured, else ""."""
        return self.model if self.url and self.model else ""
