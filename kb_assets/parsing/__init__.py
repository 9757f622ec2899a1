"""Format-aware parsing into pages of blocks (plain Python; the Dagster asset calls ``parse_document``).

| extension | reader | pages | mode |
|---|---|---|---|
| .pdf | docling NativePdfPipeline + heuristics (pdf.py) | physical pages | docling-native-pdf |
| .docx | docling | logical (top-level headings, ~1500 chars) | docling-docx |
| .html .htm .xhtml | docling | logical | docling-html |
| .md .markdown | docling | logical | docling-markdown |
| .pptx | docling (+ notes layer) | one per slide | docling-pptx |
| .xlsx .xlsm | docling | one per sheet | docling-xlsx |
| .csv | docling | 50 data rows a page | docling-csv |
| .txt, source code | own reader (text.py) | ~60 lines | text-lines (parser "plain-text") |
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

__all__ = [
    "BLOCK_KINDS",
    "Block",
    "DocumentParseError",
    "ParsedDocument",
    "ParsedPage",
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

SUPPORTED_EXTENSIONS = frozenset({*_DOCLING_FORMATS, *_TEXT, *_CODE})


def source_kind_for(name: str) -> str | None:
    """The source kind a file name maps to, or None when it is not supported."""
    suffix = Path(name).suffix.lower()
    if suffix in _DOCLING_FORMATS:
        return _DOCLING_FORMATS[suffix][0]
    if suffix in _TEXT:
        return "text"
    if suffix in _CODE:
        return "code"
    return None


def parse_document(path: Path, *, name: str | None = None) -> ParsedDocument:
    """Parse one file into pages of blocks.

    ``name`` is the file's display name (e.g. its source path) used in error messages, for the
    title fallback and, when ``path`` is a stored blob without the original extension, for the
    format. Raises ``DocumentParseError`` (message ``"<name>: <reason>"``) for missing, empty,
    corrupt or unsupported files.
    """
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

    if kind in ("text", "code"):
        from kb_assets.parsing.text import parse_text

        mime = _TEXT.get(suffix) or _CODE[suffix]
        return parse_text(path, display, kind, mime)

    source_kind, mime = _DOCLING_FORMATS[suffix]
    docling_suffix = _DOCLING_SUFFIX.get(suffix, suffix)
    if source_kind == "pdf":
        from kb_assets.parsing.pdf import parse_pdf

        return parse_pdf(path, display)

    from kb_assets.parsing import structured

    if source_kind == "pptx":
        return structured.parse_pptx(path, display, mime)
    if source_kind == "xlsx":
        return structured.parse_xlsx(path, display, mime, docling_suffix)
    if source_kind == "csv":
        return structured.parse_csv(path, display, mime)
    return structured.parse_flowing(path, display, source_kind, mime, docling_suffix)
