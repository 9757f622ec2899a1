"""Text that runs past a side of the page: docling-parse drops every character outside the page box,
pdfium's text layer keeps them, and so must the parser.

An overfull line (TeX's overfull box: a long URL, path or command) runs past the margin and off the
page. A PDF viewer's search finds that text, and a reader asks for it: the Debian Edu manual's
``mirror/http/proxy=http://10.0.2.2:3128`` was parsed as ``mirror/http/proxy=http://`` (the answer of a
detail question), ``users-and-groups.html`` as ``users-a``. ``recover_overflow`` reads with pdfium the
characters that cross the left or right side (docling-parse drops a character whose cell, pdfium's
loose box, crosses the side, not only one wholly outside), in runs of consecutive characters on one
line, and joins each run to the line it continues: on the same baseline, ending where the run starts
(a run past the left side goes in front of the line it leads into). A run that continues no line
becomes a line of its own.

Only the sides: text below the foot or above the top of the page (in the Debian Reference, a table run
off the page's foot: single cells, 29 runs) belongs to the reading order of no page and stays out.
Recovered on the development corpus: Debian Reference 487 characters in 50 runs, Debian Edu manual 176
in 16, R-exts 26 in 4, R-admin 13 in 2 (``...tar.xz``), R-ints 12 in 1; every run joined its line.
Only pages where a line ends near a side are read again: 0.12 s for the Debian Reference's 261 pages
(docling-parse: 9 s); reading every page's text rectangles cost 1.3 s.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_assets.parsing.layout import Line, PageLines
from kb_assets.parsing.layout.blocks import union_box
from kb_assets.parsing.model import clean_inline

EDGE = 2.0  # points: a page is read character by character when a text rectangle comes this near its side


@dataclass
class Run:
    """Consecutive characters outside the page box, in page units, top-left origin."""

    text: str
    l: float  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
    t: float
    r: float
    b: float


def recover_overflow(pdf, pages: dict[int, PageLines], warnings: list[str]) -> None:
    """Add the text past each page's sides to its lines (in place; OCRed and rotated pages are left
    alone). A page pdfium cannot read keeps its lines as docling-parse gave them, with a warning."""
    import pypdfium2 as pdfium

    for index, lines in pages.items():
        if lines.ocr or not near_a_side(lines):
            continue
        try:
            runs = _page_runs(pdf, index)
        except pdfium.PdfiumError as error:
            warnings.append(f"page {index + 1}: text past the page's side not recovered ({error})")
            continue
        for run in runs:
            attach(lines, run)


def _page_runs(pdf, index: int) -> list[Run]:
    """The runs of one page (none on a rotated page: pdfium's boxes are in the unrotated page, docling's
    lines are not)."""
    page = pdf[index]
    try:
        if page.get_rotation():
            return []
        text_page = page.get_textpage()
        try:
            return outside_runs(text_page, page.get_bbox())
        finally:
            text_page.close()
    finally:
        page.close()


def near_a_side(lines: PageLines) -> bool:
    """Whether a line of the page ends within a line's height of a side (docling-parse's lines stop
    where a run crosses it, a glyph's cell before the side at most): only those pages are read again."""
    return any(
        line.r > lines.width - max(EDGE, line.b - line.t) or line.l < max(EDGE, line.b - line.t) for line in lines.lines
    )


def outside_runs(text_page, bbox: tuple[float, float, float, float]) -> list[Run]:
    """The runs of characters that cross the left or right side of ``bbox`` (pdfium's page box: left,
    bottom, right, top, PDF units) on a line inside the page. Only the characters around a text
    rectangle that comes near a side are read: a page with none costs one pass over its rectangles."""
    left, bottom, right, top = bbox
    count = text_page.count_chars()
    boxes: dict[int, tuple[float, float, float, float]] = {}

    def outside(i: int) -> bool:
        if i not in boxes:
            boxes[i] = text_page.get_charbox(i, loose=True)  # the glyph's whole cell, as docling-parse sees it
        l, b, r, t = boxes[i]  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
        return (r > l or t > b) and (l < left or r > right) and bottom <= (b + t) / 2 <= top

    found: set[int] = set()
    for k in range(text_page.count_rects()):
        l, b, r, t = text_page.get_rect(k)  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
        for x in ([r - 0.5] if r > right - EDGE else []) + ([l + 0.5] if l < left + EDGE else []):
            i = text_page.get_index(x, (b + t) / 2, 1.0, (t - b) / 2)
            if i is None or i < 0 or i in found or not outside(i):
                continue
            found.add(i)
            for step in (-1, 1):  # the characters of the run on either side
                j = i + step
                while 0 <= j < count and j not in found and outside(j):
                    found.add(j)
                    j += step
    groups: list[list[int]] = []  # consecutive characters, each overlapping its run's box vertically
    for i in sorted(found):
        if groups and groups[-1][-1] == i - 1:
            so_far = union_box([boxes[j] for j in groups[-1]])
            assert so_far is not None  # a group holds at least one character
            _, bottom_so_far, _, top_so_far = so_far
            if not (boxes[i][1] > top_so_far or boxes[i][3] < bottom_so_far):
                groups[-1].append(i)
                continue
        groups.append([i])
    runs = []
    for group in groups:
        text = clean_inline(text_page.get_text_range(group[0], len(group)))
        box = union_box([boxes[i] for i in group])
        assert box is not None  # a group holds at least one character
        l, b, r, t = box  # (l, b, r, t): PDF units, bottom-left origin  # noqa: E741 (l, t, r, b: a box's edges, as docling names them)
        if text:
            runs.append(Run(text, l - left, top - t, r - left, top - b))
    return runs


def attach(lines: PageLines, run: Run) -> None:
    """Join the run to the line it continues (replacing that line), else add it as a line of its own."""
    height = run.b - run.t

    def same_baseline(line: Line) -> bool:
        overlap = min(line.b, run.b) - max(line.t, run.t)
        return overlap >= 0.5 * min(height, line.b - line.t)

    if run.l >= 0:  # past the right side: after the rightmost line that ends where the run starts
        before = [(i, line) for i, line in enumerate(lines.lines) if same_baseline(line) and line.r <= run.l + 2]
        if before:
            i, line = max(before, key=lambda item: item[1].r)
            lines.lines[i] = _joined(line, run, line)
            return
    else:  # past the left side: before the leftmost line that starts where the run ends
        after = [(i, line) for i, line in enumerate(lines.lines) if same_baseline(line) and line.l >= run.r - 2]
        if after:
            i, line = min(after, key=lambda item: item[1].l)
            lines.lines[i] = _joined(run, line, line)
            return
    at = sum(1 for line in lines.lines if line.t <= run.t)
    lines.lines.insert(at, Line(run.text, run.l, run.t, run.r, run.b, lines.body_font or ""))


def _joined(first: Line | Run, second: Line | Run, line: Line) -> Line:
    """``first`` then ``second`` as one line with ``line``'s font (a space between them where the gap is
    over a quarter of ``line``'s height)."""
    gap = " " if second.l - first.r > 0.25 * (line.b - line.t) else ""
    return Line(
        first.text + gap + second.text, first.l, min(first.t, second.t), second.r, max(first.b, second.b), line.font
    )
