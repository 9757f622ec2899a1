"""Format-aware parsing into pages of blocks (plain Python; the Dagster asset calls ``parse_document``).

Formats are registered in formats.py (one ``Format`` each: extensions -> source kind, mime, what
sniffing expects, reader):

| extensions | source kind | reader | pages | mode |
|---|---|---|---|---|
| .pdf | pdf | ``pdf.parse_pdf``: docling's layout model where present (pdf/layout_model.py), else docling's NativePdfPipeline + our layout pass (pdf/native.py, layout/); OCR of scanned pages (pdf/scans.py) | physical pages | docling-layout / docling-native-pdf / ocr-rapidocr (or ocr-tesseract) |
| .docx | docx | ``structured.parse_docx`` (docling) | logical (top-level headings, ~1500 chars) | docling-docx |
| .pptx | pptx | ``structured.parse_pptx`` (docling, + notes layer) | one per slide | docling-pptx |
| .xlsx .xlsm | xlsx | ``structured.parse_xlsx`` (docling) | one per sheet, large sheets by row ranges | docling-xlsx |
| .csv | csv | ``structured.parse_csv`` (docling) | 50 data rows a page | docling-csv |
| .html .htm .xhtml | html | ``structured.parse_html`` (docling) | logical | docling-html |
| .md .markdown | markdown | ``structured.parse_markdown`` (docling) | logical | docling-markdown |
| .png .jpg .jpeg .tif .tiff .gif .bmp .webp | image | ``images.parse_image``: OCR (ocr.py) + our layout pass | one per image frame | ocr-rapidocr (or ocr-tesseract) |
| .txt .text .log .rst | text | ``text.parse_text`` (own reader) | sections / ~60 lines | text-lines |
| .py .js .ts .java .go .rs .c .sql .json .yaml ... | code | ``text.parse_code`` (own reader) | top-level definitions | code-definitions |

Before a reader runs, ``parse_document`` checks the file (``ParseOptions`` limits): size, what the
content really is (sniff.py: a PDF named ``.docx`` is parsed as a PDF, with a warning; text named
``.pdf``, legacy Office files, encrypted Office files and unknown binaries are refused), ZIP bombs
(Office packages); the readers check page counts (PDF, TIFF frames) and image pixel counts. All of
it comes before anything that depends on the machine (docling's models, an OCR engine). Markdown/
CSV/HTML that is not UTF-8 is decoded by detection (charset-normalizer) and handed to docling as
UTF-8. Every refusal is a ``DocumentParseError`` naming the file and the reason.

Modules: formats.py (the registry), sniff.py (content and ZIP checks), model.py (pages, blocks,
``SourceFile``), options.py (``ParseOptions``), converter.py (docling's converter), docling_blocks.py
(docling's tree -> blocks), structured.py and paginate.py (docling formats, logical pages), text.py
(text and code), pdf/ (PDFs), layout/ (positioned lines -> blocks, for PDFs, scans and images),
ocr.py (OCR engines), images.py (image files), render.py (page images and figure crops).

Adding a format: write a reader ``SourceFile -> ParsedDocument`` (a new module here, or a function
beside a relative), then add one ``Format(...)`` line to ``formats.FORMATS``.
"""  # noqa: E501 (the table of formats: one row a line)

from __future__ import annotations

from pathlib import Path

from kb_assets.parsing import sniff
from kb_assets.parsing.formats import (
    SUPPORTED_EXTENSIONS,
    Format,
    format_for,
    source_kind_for,
)
from kb_assets.parsing.model import (
    BLOCK_KINDS,
    Block,
    DocumentParseError,
    ParsedDocument,
    ParsedPage,
    SourceFile,
    render_table,
)
from kb_assets.settings import ParseOptions

# The version of parsing and the layout pass: bump it when a change of this package changes the pages
# it makes (text, blocks, labels, modes). Pages parsed by another version are stale: the next ingest
# parses them again (kb_assets.pipeline.versions).
# 2: text past a side of a PDF page is kept (pdf/overflow.py); 3: table rows not mixed (layout/tables.py)
PARSER_VERSION = "3"

__all__ = [
    "BLOCK_KINDS",
    "PARSER_VERSION",
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


def parse_document(path: Path, *, name: str | None = None, options: ParseOptions | None = None) -> ParsedDocument:
    """Parse one file into pages of blocks.

    ``name`` is the file's display name (e.g. its source path) used in error messages, for the
    title fallback and, when ``path`` is a stored blob without the original extension, for the
    format. ``options``: limits, OCR engine and languages, images, docling's model folder (defaults:
    ``ParseOptions()``). Raises ``DocumentParseError`` (message ``"<name>: <reason>"``) for missing,
    empty, oversized, corrupt, encrypted, disguised or unsupported files.
    """
    options = options or ParseOptions()
    path = Path(path)
    display = name or path.name
    suffix = Path(display).suffix.lower() or path.suffix.lower()
    fmt = format_for(suffix)
    if fmt is None:
        shown = suffix or "(no extension)"
        raise DocumentParseError(display, f"unsupported file type {shown!r}")
    _check_size(path, display, options.max_file_bytes)
    fmt, suffix, warnings = _format_of_content(display, fmt, suffix, sniff.sniff(path))
    if fmt.content in sniff.PACKAGES:
        sniff.check_zip(path, display, options.max_unpacked_bytes)
    doc = fmt.read(SourceFile(path, display, fmt.source_kind, fmt.extensions[suffix], options))
    doc.warnings[:0] = warnings
    return doc


def _check_size(path: Path, display: str, max_file_bytes: int) -> None:
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
    if size > max_file_bytes:
        raise DocumentParseError(
            display, f"file is {size} bytes, over the limit of {max_file_bytes} (KB_PARSE_MAX_FILE_BYTES)"
        )


def _format_of_content(display: str, fmt: Format, suffix: str, content: str) -> tuple[Format, str, list[str]]:
    """The format (and extension) a file is parsed as, from what sniffing found in it: the
    extension's own, or the format its content really is (with a warning); refusals otherwise."""
    declared, actual = fmt.content, sniff.family(content)
    if content == "encrypted-office":
        raise DocumentParseError(
            display, "password-protected (encrypted) Office document: remove the password and ingest it again"
        )
    if content == "ole2":
        raise DocumentParseError(
            display, "legacy Office 97-2003 binary file (.doc/.xls/.ppt) is not supported: save it as .docx/.xlsx/.pptx"
        )
    if actual == "zip":
        what = (
            f"not a valid {suffix.lstrip('.').upper()} file" if declared in sniff.PACKAGES else f"not a {suffix} file"
        )
        raise DocumentParseError(display, f"{what} (a ZIP archive that is no Office document, or a truncated one)")
    if actual == "binary":
        raise DocumentParseError(display, f"binary content that is no supported format (extension {suffix})")
    if actual == "text" and declared != "text":
        raise DocumentParseError(display, f"not a valid {suffix.lstrip('.').upper()} file: the content is text")
    if actual == declared or actual == "text":
        return fmt, suffix, []
    warning = (
        f"the extension is {suffix} but the content is {sniff.describe(content)}: parsed as {sniff.describe(content)}"
    )
    suffix = f".{content}"  # every binary content kind is registered under its own name (formats.py)
    by_content = format_for(suffix)
    if by_content is None:  # formats.py checks at import that this cannot happen
        raise DocumentParseError(display, f"no format reads {sniff.describe(content)} (extension {suffix})")
    return by_content, suffix, [warning]
