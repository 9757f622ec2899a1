"""What a parse may do and how much it may take: limits, OCR, images, the docling model folder.

The defaults are the module constants below; ``ParseOptions.from_settings`` takes the ``KB_PARSE_*``,
``KB_OCR_ENGINE``, ``KB_OCR_LANGUAGES`` and ``DOCLING_ARTIFACTS_PATH`` values that :class:`kb_assets.settings.Settings`
read from the environment.
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
OCR_ENGINE = "rapidocr"  # KB_OCR_ENGINE: rapidocr (models in its wheel) or tesseract (ocr.py)
OCR_LANGUAGES = "eng+chi_sim"  # KB_OCR_LANGUAGES: tesseract language codes (rapidocr reads its languages at once)
PAGE_IMAGE_SCALE = 1.0  # page renders: 72 dpi
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
    images: bool = True  # render page images and figure crops (PDF) into the parsed pages
    docling_artifacts_path: Path | None = None  # docling's model folder (DOCLING_ARTIFACTS_PATH)

    @classmethod
    def from_settings(cls, settings) -> "ParseOptions":
        artifacts = getattr(settings, "docling_artifacts_path", None)
        return cls(
            max_file_bytes=settings.parse_max_file_bytes,
            max_pages=settings.parse_max_pages,
            max_unpacked_bytes=settings.parse_max_unpacked_bytes,
            ocr_engine=settings.ocr_engine,
            ocr_languages=settings.ocr_languages,
            docling_artifacts_path=Path(artifacts).expanduser() if artifacts else None,
        )
