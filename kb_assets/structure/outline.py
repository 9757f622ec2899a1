"""The PDF outline (bookmarks) and document information of a stored original, read with pypdfium2."""

from __future__ import annotations

import pypdfium2 as pdfium

MAX_DEPTH = 8


def read_outline(pdf_bytes: bytes) -> list[tuple[int, str, int]]:
    """(level 1 = top, title, 0-based page_index) of every bookmark that points at a page, in order.

    A PDF without an outline gives []; so does one pypdfium2 cannot open (parsing reports that).
    """
    try:
        pdf = pdfium.PdfDocument(pdf_bytes)
    except pdfium.PdfiumError:
        return []
    try:
        page_count = len(pdf)
        entries = []
        for bookmark in pdf.get_toc(max_depth=MAX_DEPTH):
            title = " ".join((bookmark.get_title() or "").split())
            dest = bookmark.get_dest()
            page_index = dest.get_index() if dest is not None else None
            if title and page_index is not None and 0 <= page_index < page_count:
                entries.append((bookmark.level + 1, title, page_index))
        return entries
    finally:
        pdf.close()


def read_pdf_info(pdf_bytes: bytes) -> dict[str, str]:
    """The PDF's document information (``Title``, ``Author``, ``Subject``, ...); {} when it cannot be read."""
    try:
        pdf = pdfium.PdfDocument(pdf_bytes)
    except pdfium.PdfiumError:
        return {}
    try:
        return {key: str(value) for key, value in pdf.get_metadata_dict(skip_empty=True).items()}
    finally:
        pdf.close()
