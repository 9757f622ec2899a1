"""What a parse may do and how much it may take: limits, OCR, images, the docling model folder.

The defaults are the module constants below; :class:`kb_assets.settings.Settings` builds the options
from ``KB_PARSE_*``, ``KB_OCR_ENGINE``, ``KB_OCR_LANGUAGES``, ``TESSDATA_PREFIX`` and
``DOCLING_ARTIFACTS_PATH``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 200 * 1024 * 1024  # KB_PARSE_MAX_FILE_BYTES
MAX_PAGES = 5000  # KB_PARSE_MAX_PAGES: PDF pages (and TIFF frames)
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024  # KB_PARSE_MAX_UNPACKED_BYTES: all members of a DOCX/PPTX/XLSX
MAX_PACK_RATIO = 200  # a ZIP member unpacking to more than 200x its packed size (and > 10 MB) is a bomb
MAX_ZIP_MEMBERS = 20_000
MAX_IMAGE_PIXELS = 150_000_000  # an image file (or one TIFF frame) larger than this is refused
OCR_ENGINES = ("rapidocr", "tesseract")  # KB_OCR_ENGINE: rapidocr (models in its wheel, the default) or tesseract
OCR_ENGINE = OCR_ENGINES[0]
OCR_LANGUAGES = "eng+chi_sim"  # KB_OCR_LANGUAGES: tesseract language codes (rapidocr reads its languages at once)
PAGE_IMAGE_SCALE = 1.0  # page renders: 72 dpi
PAGE_IMAGE_MAX_SIDE = 1400  # page renders of image files: at most this many pixels a side
FIGURE_IMAGE_SCALE = 2.0  # figure crops: 144 dpi
OCR_DPI = 300
MAX_RENDER_PIXELS = 40_000_000  # any render (page, crop, OCR) is scaled down to stay under this


@dataclass(frozen=True)
class ParseOptions:
    max_file_bytes: int = MAX_FILE_BYTES
    max_pages: int = MAX_PAGES
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES
    max_image_pixels: int = MAX_IMAGE_PIXELS
    ocr: bool = True  # OCR pages without a text layer and image files
    ocr_engine: str = OCR_ENGINE
    ocr_languages: str = OCR_LANGUAGES
    images: bool = True  # crop figures (PDF) into their blocks (page images: render.render_page_images)
    tessdata_dir: Path | None = None  # tesseract's language data (TESSDATA_PREFIX); None: Debian's folders
    docling_artifacts_path: Path | None = None  # docling's model folder (DOCLING_ARTIFACTS_PATH)
    scratch_dir: Path | None = None  # where a parse puts its temporary copy of the source; None: the system's
    workers: int = 1  # processes that convert one PDF's page batches (KB_PARSE_WORKERS; 1: this process)
