"""What pypdfium2 reads of a PDF before any pipeline runs: page count (the page limit is checked
here, before anything that depends on the machine), metadata title, page labels and the outline
(bookmarks). Opening the file is also the cheap validity check: encrypted, truncated or corrupt
PDFs are refused here.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from kb_assets.parsing.model import DocumentParseError, ParsedPage, clean_inline


@dataclass
class PdfFacts:
    page_count: int
    title: str | None  # the metadata title, unless it is a placeholder or a file name
    labels: list[str | None]  # the PDF's own page labels (/PageLabels), per page
    outline: dict[int, dict[str, int]]  # bookmarks: page index -> lowercased title -> level (1 = top)


def read_facts(path: Path, name: str, max_pages: int) -> PdfFacts:
    """Page count, metadata title, page labels and the outline, read with pypdfium2."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        if "password" in text:
            raise DocumentParseError(name, "encrypted PDF (a password is required)") from exc
        raise DocumentParseError(name, f"not a valid PDF (file is truncated or corrupt: {exc})") from exc
    try:
        count = len(pdf)
        if count == 0:
            raise DocumentParseError(name, "PDF has no pages")
        if count > max_pages:
            raise DocumentParseError(name, f"PDF has {count} pages, over the limit of {max_pages} (KB_PARSE_MAX_PAGES)")
        try:
            title = _clean_title(pdf.get_metadata_dict().get("Title", ""))
        except Exception:
            title = None
        labels: list[str | None] = []
        for i in range(count):
            try:
                label = clean_inline(pdf.get_page_label(i))
            except Exception:
                label = ""
            labels.append(label or None)
        return PdfFacts(count, title, labels, _outline(pdf))
    finally:
        pdf.close()


def document_title(facts: PdfFacts, pages: list[ParsedPage], name: str) -> str:
    """The metadata title, else the top heading of the first three pages, else the file name."""
    return facts.title or _first_heading(pages) or Path(name).stem


def _outline(pdf) -> dict[int, dict[str, int]]:
    entries: dict[int, dict[str, int]] = defaultdict(dict)
    try:
        for n, bookmark in enumerate(pdf.get_toc(max_depth=6)):
            if n >= 5000:
                break
            dest = bookmark.get_dest()
            index = dest.get_index() if dest is not None else None
            title = clean_inline(bookmark.get_title() or "").lower()
            if index is not None and title:
                entries[index].setdefault(title, min(bookmark.level + 1, 6))
    except Exception:  # a broken outline is no reason to fail the document
        return {}
    return dict(entries)


def _clean_title(raw: str) -> str | None:
    title = clean_inline(raw or "")
    title = re.sub(r"^Microsoft (Word|PowerPoint|Excel) - ", "", title)
    if not title or title.lower() in {"untitled", "unknown", "title", "document", "anonymous", "(anonymous)"}:
        return None
    if re.search(r"\.(docx?|pptx?|xlsx?|pdf|odt|rtf|tex|indd)$", title, re.IGNORECASE):
        return None
    return title


def _first_heading(pages: list[ParsedPage]) -> str | None:
    headings = [b for p in pages[:3] for b in p.blocks if b.kind == "heading"]
    if not headings:
        return None
    top = min(b.level or 99 for b in headings)
    return next(b.text for b in headings if (b.level or 99) == top)
