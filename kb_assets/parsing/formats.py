"""Every file format parsing reads, one registration each: extensions -> source kind, mime, what
sniffing must find in the file, and the reader.

A reader is a function ``SourceFile -> ParsedDocument`` (model.py), registered as
``"module:function"`` under kb_assets.parsing and imported when a file of its format is first parsed
(importing this package stays light). It runs after ``parse_document`` has checked the file (size,
content against the extension, ZIP bombs for Office packages) and checks its own format's limits
(pages, pixels) before anything that depends on the machine (docling's models, an OCR engine).

``content`` is what sniff.py must find: ``pdf``, ``docx``, ``pptx``, ``xlsx`` (a ZIP package of
that kind, checked by ``check_zip``), ``image`` (any image sniff.py knows) or ``text`` (no NUL
bytes). A file whose content is another binary format is parsed as that format under the extension
named for its content (``.pdf``, ``.docx``, ``.png``, ``.jpeg``, ...), with a warning.

To add a format: write its reader (a new module under parsing/, or a function beside a relative),
then add one ``Format(...)`` line to ``FORMATS``. ``parse_document``, ``SUPPORTED_EXTENSIONS`` and
``source_kind_for`` follow.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kb_assets.parsing.model import ParsedDocument, SourceFile
from kb_assets.parsing.sniff import (
    CONTENT_FAMILIES,
    IMAGE_KINDS,
    PACKAGES,
    describe,
    family,
)


@dataclass(frozen=True)
class Format:
    source_kind: str  # ParsedDocument.source_kind
    extensions: Mapping[str, str]  # lowercase extension with the dot -> mime
    content: str  # what sniffing must find: one of sniff.CONTENT_FAMILIES
    reader: str  # "module:function" under kb_assets.parsing, imported when first used

    def read(self, file: SourceFile) -> ParsedDocument:
        return self.load_reader()(file)

    def load_reader(self) -> Callable[[SourceFile], ParsedDocument]:
        module, function = self.reader.split(":")
        return getattr(importlib.import_module(f"kb_assets.parsing.{module}"), function)


_OOXML = "application/vnd.openxmlformats-officedocument"
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

FORMATS: tuple[Format, ...] = (
    Format("pdf", {".pdf": "application/pdf"}, "pdf", "pdf:parse_pdf"),
    Format("docx", {".docx": f"{_OOXML}.wordprocessingml.document"}, "docx", "structured:parse_docx"),
    Format("pptx", {".pptx": f"{_OOXML}.presentationml.presentation"}, "pptx", "structured:parse_pptx"),
    Format(
        "xlsx",
        {".xlsx": f"{_OOXML}.spreadsheetml.sheet", ".xlsm": "application/vnd.ms-excel.sheet.macroEnabled.12"},
        "xlsx",
        "structured:parse_xlsx",
    ),
    Format("csv", {".csv": "text/csv"}, "text", "structured:parse_csv"),
    Format(
        "html",
        {".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml"},
        "text",
        "structured:parse_html",
    ),
    Format("markdown", {".md": "text/markdown", ".markdown": "text/markdown"}, "text", "structured:parse_markdown"),
    Format("image", _IMAGES, "image", "images:parse_image"),
    Format("text", _TEXT, "text", "text:parse_text"),
    Format("code", _CODE, "text", "text:parse_code"),
)


def _by_extension(formats: tuple[Format, ...]) -> dict[str, Format]:
    table: dict[str, Format] = {}
    for fmt in formats:
        if fmt.content not in CONTENT_FAMILIES:
            raise ValueError(f"format {fmt.source_kind!r}: content {fmt.content!r} is none of {CONTENT_FAMILIES}")
        for extension in fmt.extensions:
            if extension != extension.lower() or not extension.startswith("."):
                raise ValueError(f"format {fmt.source_kind!r}: extension {extension!r} is not like '.pdf'")
            if extension in table:
                raise ValueError(f"extension {extension} is registered twice")
            table[extension] = fmt
    for kind in ("pdf", *PACKAGES, *IMAGE_KINDS):  # a misnamed file is parsed under ".<kind>"
        registered = table.get(f".{kind}")
        if registered is None or registered.content != family(kind):
            raise ValueError(f"sniffing finds {describe(kind)} but no format reads it under .{kind}")
    return table


_BY_EXTENSION = _by_extension(FORMATS)
SUPPORTED_EXTENSIONS = frozenset(_BY_EXTENSION)


def format_for(extension: str) -> Format | None:
    """The format registered for an extension (``.pdf``, any case), or None."""
    return _BY_EXTENSION.get(extension.lower())


def source_kind_for(name: str) -> str | None:
    """The source kind a file name maps to, or None when it is not supported."""
    fmt = format_for(Path(name).suffix)
    return fmt.source_kind if fmt is not None else None
