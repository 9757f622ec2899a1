"""Format-aware parsing into pages of blocks (plain Python; the Dagster asset calls ``parse_document``).

| extension | reader | pages | mode |
|---|---|---|---|
| .pdf | docling (layout model where present, else NativePdfPipeline + heuristics: pdf.py), OCR for scans (ocr.py) | physical pages | docling-layout / docling-native-pdf / ocr-rapidocr (or ocr-tesseract) |
| .docx | docling | logical (top-level headings, ~1500 chars) | docling-docx |
| .html .htm .xhtml | docling | logical | docling-html |
| .md .markdown | docling | logical | docling-markdown |
| .pptx | docling (+ notes layer) | one per slide | docling-pptx |
| .xlsx .xlsm | docling | one per sheet | docling-xlsx |
| .csv | docling | 50 data rows a page | docling-csv |
| .png .jpg .tif ... | OCR (images.py, ocr.py) | one per image frame | ocr-rapidocr (or ocr-tesseract) |
| .txt, source code | own reader (text.py) | text: sections/~60 lines; code: top-level definitions | text-lines / code-definitions |

Before a reader runs, the file is checked (``ParseOptions`` limits): size, what the content really is
(sniff.py: a PDF named ``.docx`` is parsed as a PDF, with a warning; text named ``.pdf``, legacy
Office files, encrypted Office files and unknown binaries are refused), ZIP bombs (Office formats),
page counts, image pixel counts, all before anything that depends on the machine (docling's models,
an OCR engine); Markdown/CSV/HTML that is not UTF-8 is decoded by detection
(charset-normalizer) and handed to docling as UTF-8. Every refusal is a ``DocumentParseError``
naming the file and the reason.
"""

from __future__ import annotations

from pathlib import Path

from kb_assets.parsing.model import (
    BLOCK_KINDS,
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    render_table,
)
from kb_assets.parsing.options import ParseOptions

__all__ = [
    "BLOCK_KINDS",
    "Block",
    "DocumentParseError",
    "ParsedDocument",
    "ParsedPage",
    "ParseOptions",
    "SUPPORTED_EXTENSIONS",
    "parse_document",
    "render_table",
    "source_kind_for",
]

# extension -> (source kind, mime)
_DOCLING_FORMATS: dict[str, tuple[str, str]] = {
    ".pdf": ("pdf", "application/pdf"),
    ".docx": ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ".pptx": ("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ".xlsx": ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ".xlsm": ("xlsx", "application/vnd.ms-excel.sheet.macroEnabled.12"),
    ".csv": ("csv", "text/csv"),
    ".html": ("html", "text/html"),
    ".htm": ("html", "text/html"),
    ".xhtml": ("html", "application/xhtml+xml"),
    ".md": ("markdown", "text/markdown"),
    ".markdown": ("markdown", "text/markdown"),
}
# the suffix docling is shown for each extension (it picks backends by name)
_DOCLING_SUFFIX = {".xlsm": ".xlsx", ".htm": ".html", ".xhtml": ".html", ".markdown": ".md"}

_IMAGES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".gif": "image/gif",
    ".bmp": "image/bmp",
    ".webp": "image/webp",
}
_TEXT = {".txt": "text/plain", ".text": "text/plain", ".log": "text/plain", ".rst": "text/x-rst"}
_CODE = {
    ".py": "text/x-python",
    ".pyi": "text/x-python",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".cjs": "text/javascript",
    ".jsx": "text/javascript",
    ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript",
    ".java": "text/x-java",
    ".kt": "text/x-kotlin",
    ".scala": "text/x-scala",
    ".go": "text/x-go",
    ".rs": "text/x-rust",
    ".c": "text/x-c",
    ".h": "text/x-c",
    ".cc": "text/x-c++",
    ".cpp": "text/x-c++",
    ".hpp": "text/x-c++",
    ".cs": "text/x-csharp",
    ".rb": "text/x-ruby",
    ".php": "text/x-php",
    ".swift": "text/x-swift",
    ".lua": "text/x-lua",
    ".r": "text/x-r",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".sql": "application/sql",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".ini": "text/plain",
    ".cfg": "text/plain",
    ".xml": "application/xml",
    ".css": "text/css",
}

SUPPORTED_EXTENSIONS = frozenset({*_DOCLING_FORMATS, *_IMAGES, *_TEXT, *_CODE})
# the extension a sniffed content kind is parsed under when the file's own extension is wrong
_SUFFIX_OF_CONTENT = {"pdf": ".pdf", "docx": ".docx", "pptx": ".pptx", "xlsx": ".xlsx"}
_BINARY_KINDS = ("pdf", "docx", "pptx", "xlsx", "image")


def source_kind_for(name: str) -> str | None:
    """The source kind a file name maps to, or None when it is not supported."""
    suffix = Path(name).suffix.lower()
    if suffix in _DOCLING_FORMATS:
        return _DOCLING_FORMATS[suffix][0]
    if suffix in _IMAGES:
        return "image"
    if suffix in _TEXT:
        return "text"
    if suffix in _CODE:
        return "code"
    return None


def parse_document(path: Path, *, name: str | None = None, options: ParseOptions | None = None) -> ParsedDocument:
    """Parse one file into pages of blocks.

    ``name`` is the file's display name (e.g. its source path) used in error messages, for the
    title fallback and, when ``path`` is a stored blob without the original extension, for the
    format. ``options``: limits, OCR engine and languages, images, docling's model folder (defaults:
    ``ParseOptions()``). Raises ``DocumentParseError`` (message ``"<name>: <reason>"``) for missing,
    empty, oversized, corrupt, encrypted, disguised or unsupported files.
    """
    from kb_assets.parsing import sniff

    options = options or ParseOptions()
    path = Path(path)
    display = name or path.name
    suffix = Path(display).suffix.lower() or path.suffix.lower()
    kind = source_kind_for(f"x{suffix}")
    if kind is None:
        shown = suffix or "(no extension)"
        raise DocumentParseError(display, f"unsupported file type {shown!r}")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DocumentParseError(display, "file not found") from None
    except OSError as exc:
        raise DocumentParseError(display, f"cannot read the file ({exc})") from exc
    if not path.is_file():
        raise DocumentParseError(display, "not a regular file")
    if size == 0:
        raise DocumentParseError(display, "file is empty (0 bytes)")
    if size > options.max_file_bytes:
        raise DocumentParseError(
            display, f"file is {size} bytes, over the limit of {options.max_file_bytes} (KB_PARSE_MAX_FILE_BYTES)"
        )

    content = sniff.sniff(path)
    declared = "image" if kind == "image" else ("text" if kind in ("text", "code") else _DOCLING_FORMATS[suffix][0])
    if declared in ("csv", "html", "markdown"):
        declared = "text"
    actual = "image" if content in sniff.IMAGE_KINDS else content
    warnings: list[str] = []
    if content == "encrypted-office":
        raise DocumentParseError(display, "password-protected (encrypted) Office document: remove the password and ingest it again")
    if content == "ole2":
        raise DocumentParseError(
            display, "legacy Office 97-2003 binary file (.doc/.xls/.ppt) is not supported: save it as .docx/.xlsx/.pptx"
        )
    if actual == "zip":
        what = f"not a valid {suffix.lstrip('.').upper()} file" if declared in ("docx", "pptx", "xlsx") else f"not a {suffix} file"
        raise DocumentParseError(display, f"{what} (a ZIP archive that is no Office document, or a truncated one)")
    if actual == "binary":
        raise DocumentParseError(display, f"binary content that is no supported format (extension {suffix})")
    if actual == "text" and declared in _BINARY_KINDS:
        raise DocumentParseError(display, f"not a valid {suffix.lstrip('.').upper()} file: the content is text")
    if actual != declared and actual in _BINARY_KINDS and not (declared == "image" and actual == "image"):
        warnings.append(
            f"the extension is {suffix} but the content is {sniff.describe(content)}: parsed as {sniff.describe(content)}"
        )
        if actual == "image":
            kind, suffix = "image", "." + content.replace("jpeg", "jpg")
        else:
            kind, suffix = actual, _SUFFIX_OF_CONTENT[actual]
    doc = _parse_as(path, display, kind, suffix, options)
    doc.warnings[:0] = warnings
    return doc


def _parse_as(path: Path, display: str, kind: str, suffix: str, options: ParseOptions) -> ParsedDocument:
    if kind in ("text", "code"):
        from kb_assets.parsing.text import parse_text

        mime = _TEXT.get(suffix) or _CODE[suffix]
        return parse_text(path, display, kind, mime)
    if kind == "image":
        from kb_assets.parsing.images import parse_image

        return parse_image(path, display, _IMAGES.get(suffix, "image/" + suffix.lstrip(".")), options)

    source_kind, mime = _DOCLING_FORMATS[suffix]
    docling_suffix = _DOCLING_SUFFIX.get(suffix, suffix)
    if source_kind == "pdf":
        from kb_assets.parsing.pdf import parse_pdf

        return parse_pdf(path, display, options)

    from kb_assets.parsing import structured
    from kb_assets.parsing.sniff import check_zip

    if source_kind in ("docx", "pptx", "xlsx"):
        check_zip(path, display, options.max_unpacked_bytes)
    if source_kind == "pptx":
        return structured.parse_pptx(path, display, mime)
    if source_kind == "xlsx":
        return structured.parse_xlsx(path, display, mime, docling_suffix)
    if source_kind == "docx":
        return structured.parse_flowing(path, display, source_kind, mime, docling_suffix)

    # CSV, HTML, Markdown: text docling reads as UTF-8 (with a cp1252 fallback only): detect others
    from kb_assets.parsing.text import decode

    raw = path.read_bytes()
    text, warning = decode(raw, display)
    data = None
    if warning:
        data = b"\xef\xbb\xbf" + text.encode("utf-8")  # a BOM: docling and BeautifulSoup both honour it
    if source_kind == "csv":
        doc = structured.parse_csv(path, display, mime, data=data)
    else:
        doc = structured.parse_flowing(path, display, source_kind, mime, docling_suffix, data=data)
    if warning:
        doc.warnings.append(warning)
    return doc
