"""Parsing with real docling (no mocks) on small fixtures built here, plus the sample corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kb_assets.parsing import Block, DocumentParseError, ParsedDocument, parse_document, render_table

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"


def _norm(text: str) -> str:
    return " ".join(text.split())


def _page_with(doc: ParsedDocument, needle: str) -> list[int]:
    return [p.page_index for p in doc.pages if _norm(needle) in _norm(p.text)]


def _check_invariants(doc: ParsedDocument) -> None:
    assert [p.page_index for p in doc.pages] == list(range(len(doc.pages)))
    for page in doc.pages:
        for block in page.blocks:
            assert block.text, block
            assert block.text in page.text
            assert block.text == block.text.strip()
            assert "  " not in block.text.replace("\n", "") or block.kind == "code", block
            assert "\n\n" not in block.text, block
            if block.kind in ("heading", "paragraph", "figure"):
                assert "\n" not in block.text, block
            if block.kind == "heading":
                assert block.level is not None and 1 <= block.level <= 6
            if block.kind == "table":
                assert block.rows and block.text == render_table(block.rows)
                assert len(block.text.split("\n")) == len(block.rows)


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("parsing")
    out = {
        "pdf": _make_pdf(root / "handbook.pdf"),
        "docx": _make_docx(root / "guide.docx"),
        "pptx": _make_pptx(root / "deck.pptx"),
        "xlsx": _make_xlsx(root / "costs.xlsx"),
    }
    out["csv"] = root / "scores.csv"
    out["csv"].write_text("id,name,score\n" + "".join(f"{i},name{i},{i * 2}\n" for i in range(120)))
    out["html"] = root / "runbook.html"
    out["html"].write_text(
        "<html><head><title>Replica Runbook</title></head><body><p>Read this first.</p>"
        "<h1>Restore</h1><p>Restore the <b>replica</b> from backup.</p>"
        "<h2>Steps</h2><ol><li>Stop the service.</li><li>Restore the volume.</li></ol>"
        "<h2>Checks</h2><table><tr><th>Check</th><th>Expected</th></tr>"
        "<tr><td>lag</td><td>under 30 s</td></tr></table></body></html>",
        encoding="utf-8",
    )
    out["md"] = root / "arch.md"
    out["md"].write_text(
        "# Architecture\n\nA short tour.\n\n## Ingestion\n\nKafka topics have 24 partitions.\n\n"
        "- gateway\n- uploader\n\n```yaml\nretention_days: 35\n\nowner: analytics\n```\n\n"
        "## Query\n\n| Component | Tier |\n|---|---|\n| router | 1 |\n",
        encoding="utf-8",
    )
    out["zh"] = root / "简介.md"
    out["zh"].write_text(
        "# 数据平台简介\n\n介绍。\n\n## 存储\n\n数据备份保留 35 天。\n\n## 检索\n\n向量检索服务基于 Milvus 构建。\n"
    )
    out["py"] = root / "tool.py"
    out["py"].write_text(
        "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(40)) + "\nprint('end of tool')\n"
    )
    out["txt"] = root / "notes.txt"
    out["txt"].write_bytes("Caf\xe9 notes\nsecond line of the first paragraph\n\nSecond paragraph.\n".encode("latin-1"))
    return out


def _make_pdf(path: Path) -> Path:
    """5 pages: running header (page number inside) + footer on pages 0-3, headings at the same spot
    on every text page (numbers differ: must not be taken for running headers), page 4 empty."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    c.setTitle("Storage Handbook")
    width, height = A4
    for p in range(5):
        if p < 4:
            c.setFont("Helvetica", 9)
            c.drawString(72, height - 40, f"ACME Handbook {p + 3}")
            c.drawString(width - 150, height - 40, "Internal use")
            c.drawString(width / 2, 30, f"Page {p + 1} of 5")
            y = height - 100
            c.setFont("Helvetica-Bold", 16)
            c.drawString(72, y, f"{p + 1} Chapter {p + 1}")
            y -= 30
            c.setFont("Helvetica", 11)
            for i in range(4):
                c.drawString(72, y, f"Body line {i} of page {p + 1} with enough words to look like a real paragraph")
                y -= 14
            c.drawString(72, y, f"Fact {p + 1}: the chapter closes here.")
            y -= 30
            c.setFont("Helvetica-Bold", 11)
            c.drawString(72, y, f"{p + 1}.1 Object Storage")
            y -= 18
            c.setFont("Helvetica", 11)
            c.drawString(72, y, f"Objects of chapter {p + 1} are replicated three times.")
            y -= 14
            c.drawString(72, y, "\u2022 first bullet item")
            y -= 14
            c.drawString(72, y, "\u2022 second bullet item")
        c.showPage()
    c.save()
    return path


def _make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Onboarding Guide", 0)
    d.add_paragraph("Welcome aboard.")
    d.add_heading("First Week", 1)
    d.add_paragraph("Laptop requests must be filed early.")
    d.add_heading("Accounts", 2)
    for i in range(8):  # a long section: continues on a further logical page
        d.add_paragraph(f"Long paragraph {i}: " + "access is granted per dataset and reviewed quarterly. " * 5)
    d.add_heading("Milestones", 1)
    table = d.add_table(rows=3, cols=2)
    for r, row in enumerate([("Milestone", "Day"), ("First review", "Day 3"), ("On-call shadow", "Day 21")]):
        for col, value in enumerate(row):
            table.cell(r, col).text = value
    d.add_heading("Help", 1)
    d.add_paragraph("Ask in the onboarding channel.", style="List Bullet")
    d.save(str(path))
    return path


def _make_pptx(path: Path) -> Path:
    import pptx

    deck = pptx.Presentation()
    for _i, (title, bullet, note) in enumerate(
        [
            ("Quarterly Review", "Northwind", None),
            ("Performance", "Latency dropped to 180 ms", "Cache win."),
            ("Cost", "Spend fell 12%", None),
        ]
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = bullet
        if note:
            slide.notes_slide.notes_text_frame.text = note
    deck.save(str(path))
    return path


def _make_xlsx(path: Path) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Compute"
    ws.append(["Team", "Cost"])
    ws.append(["Search", 18420])
    ws2 = wb.create_sheet("Storage")
    ws2.append(["Team", "Tier", "TB"])
    ws2.append(["Analytics", "Archive", 310])
    wb.save(str(path))
    return path


@pytest.fixture(scope="module")
def parsed(files) -> dict[str, ParsedDocument]:
    return {kind: parse_document(path) for kind, path in files.items()}


# ------------------------------------------------------------------------------------- PDF


def test_pdf_pages_headings_and_running_lines(parsed):
    doc = parsed["pdf"]
    _check_invariants(doc)
    assert doc.source_kind == "pdf" and doc.mime == "application/pdf"
    assert doc.title == "Storage Handbook"
    assert len(doc.pages) == 5
    assert all(p.parser == "docling" and p.mode == "docling-native-pdf" for p in doc.pages)
    assert doc.pages[4].blocks == [] and doc.pages[4].text == ""
    for p in range(4):
        page = doc.pages[p]
        headings = [(b.level, b.text) for b in page.blocks if b.kind == "heading"]
        assert headings == [(1, f"{p + 1} Chapter {p + 1}"), (2, f"{p + 1}.1 Object Storage")]
        assert _page_with(doc, f"Fact {p + 1}: the chapter closes here.") == [p]
        # the wrapped body lines are one paragraph
        assert any(
            b.kind == "paragraph" and b.text.startswith(f"Body line 0 of page {p + 1}") and "Body line 3" in b.text
            for b in page.blocks
        )
        assert any(
            b.kind == "list" and b.text == "\u2022 first bullet item\n\u2022 second bullet item" for b in page.blocks
        )
        # running header (digits differ per page) and footer are gone
        assert "ACME Handbook" not in page.text and "Internal use" not in page.text and "Page " not in page.text


def test_pdf_labels_image_only_page_and_encryption(tmp_path):
    from PIL import Image
    from reportlab.pdfgen import canvas

    Image.new("RGB", (60, 60), (200, 30, 30)).save(tmp_path / "red.png")
    c = canvas.Canvas(str(tmp_path / "labels.pdf"))
    c.addPageLabel(0, style="ROMAN_LOWER")
    c.addPageLabel(2, style="ARABIC", start=1)
    for i in range(3):
        if i == 1:
            c.drawImage(str(tmp_path / "red.png"), 50, 200, 400, 400)  # a "scanned" page: no text layer
        else:
            c.drawString(72, 700, f"Text on sheet {i}")
        c.showPage()
    c.save()
    doc = parse_document(tmp_path / "labels.pdf")
    assert [p.label for p in doc.pages] == ["i", "ii", "1"]
    assert [p.mode for p in doc.pages] == ["docling-native-pdf"] * 3
    # a picture smaller than a page scan is a figure (no caption: a placeholder text), not OCRed
    assert doc.pages[1].blocks == [Block("figure", "[Figure]")] and doc.pages[2].text == "Text on sheet 2"
    assert doc.pages[1].blocks[0].image_png.startswith(b"\x89PNG")
    assert doc.title == "labels"  # no metadata title, no heading: the file stem

    c = canvas.Canvas(str(tmp_path / "locked.pdf"), encrypt="secret")
    c.drawString(72, 700, "secret")
    c.showPage()
    c.save()
    with pytest.raises(DocumentParseError, match=r"^locked\.pdf: encrypted PDF"):
        parse_document(tmp_path / "locked.pdf")


def test_pdf_corrupt_and_fake_raise(tmp_path, files):
    truncated = tmp_path / "report.pdf"
    truncated.write_bytes(files["pdf"].read_bytes()[:700])
    with pytest.raises(DocumentParseError, match=r"^report\.pdf: .*not a valid"):
        parse_document(truncated)
    fake = tmp_path / "fake.pdf"
    fake.write_text("this is not a pdf")
    with pytest.raises(DocumentParseError, match=r"^fake\.pdf: "):
        parse_document(fake)


def test_pdf_name_overrides_blob_path(tmp_path, files):
    blob = tmp_path / "0f3a9c"  # content-addressed blob without extension
    blob.write_bytes(files["pdf"].read_bytes())
    doc = parse_document(blob, name="docs/handbook.pdf")
    assert len(doc.pages) == 5 and doc.source_kind == "pdf"


# ------------------------------------------------------------------------------ errors


def test_empty_unsupported_and_missing_files(tmp_path):
    empty = tmp_path / "empty.docx"
    empty.write_bytes(b"")
    with pytest.raises(DocumentParseError, match=r"^empty\.docx: file is empty"):
        parse_document(empty)
    odd = tmp_path / "archive.7z"
    odd.write_bytes(b"7z\xbc\xaf\x27\x1c....")
    with pytest.raises(DocumentParseError, match=r"^archive\.7z: unsupported file type '\.7z'"):
        parse_document(odd)
    with pytest.raises(DocumentParseError, match=r"^gone\.md: file not found"):
        parse_document(tmp_path / "gone.md")
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"not a zip archive")
    with pytest.raises(DocumentParseError, match=r"^shown/name\.xlsx: "):
        parse_document(broken, name="shown/name.xlsx")


# ------------------------------------------------------------------- format registry


def test_every_registered_format_has_a_reader_and_maps_its_extensions():
    from kb_assets.parsing import SUPPORTED_EXTENSIONS, source_kind_for
    from kb_assets.parsing.formats import FORMATS

    registered = [ext for fmt in FORMATS for ext in fmt.extensions]
    assert sorted(registered) == sorted(SUPPORTED_EXTENSIONS)  # each extension once
    for fmt in FORMATS:
        assert callable(fmt.load_reader()), fmt.reader
        for extension in fmt.extensions:
            assert source_kind_for(f"docs/file{extension.upper()}") == fmt.source_kind
    assert source_kind_for("notes.7z") is None and source_kind_for("Makefile") is None


def test_misnamed_binary_content_is_parsed_by_the_format_it_really_is():
    """Every binary kind sniffing recognizes has a format under the extension named for it."""
    from kb_assets.parsing import sniff
    from kb_assets.parsing.formats import format_for

    for kind in ("pdf", *sniff.PACKAGES, *sniff.IMAGE_KINDS):
        assert format_for(f".{kind}").content == sniff.family(kind)


# ------------------------------------------------------------------- flowing formats


def test_docx_logical_pages(parsed):
    doc = parsed["docx"]
    _check_invariants(doc)
    assert doc.source_kind == "docx" and doc.title == "Onboarding Guide"
    assert all(p.parser == "docling" and p.mode == "docling-docx" for p in doc.pages)
    first = doc.pages[0].blocks
    assert first[0] == Block("heading", "Onboarding Guide", level=1)
    # top-level sections start pages; the long "Accounts" section continues on further pages
    assert doc.pages[1].blocks[0] == Block("heading", "First Week", level=2)
    assert any(b == Block("heading", "Accounts", level=3) for b in doc.pages[1].blocks)
    long_pages = _page_with(doc, "Long paragraph 0:") + _page_with(doc, "Long paragraph 7:")
    assert long_pages[0] < long_pages[1]
    assert all(len(p.text) <= 1500 + 400 for p in doc.pages)
    milestones = _page_with(doc, "Milestones")
    table = next(b for b in doc.pages[milestones[0]].blocks if b.kind == "table")
    assert table.rows == (("Milestone", "Day"), ("First review", "Day 3"), ("On-call shadow", "Day 21"))
    assert table.text == "| Milestone | Day |\n| First review | Day 3 |\n| On-call shadow | Day 21 |"
    assert doc.pages[-1].blocks[0] == Block("heading", "Help", level=2)
    assert doc.pages[-1].blocks[1].kind == "list"


def test_html(parsed):
    doc = parsed["html"]
    _check_invariants(doc)
    assert doc.title == "Replica Runbook" and doc.source_kind == "html"
    assert {p.mode for p in doc.pages} == {"docling-html"}
    assert [b.text for p in doc.pages for b in p.blocks if b.kind == "heading"] == ["Restore", "Steps", "Checks"]
    assert doc.pages[0].blocks == [Block("paragraph", "Read this first.")]  # text before the first heading is kept
    assert _page_with(doc, "Restore the replica from backup.") == [1]  # inline <b> joined
    steps = next(b for p in doc.pages for b in p.blocks if b.kind == "list")
    assert steps.text == "1. Stop the service.\n2. Restore the volume."
    table = next(b for p in doc.pages for b in p.blocks if b.kind == "table")
    assert table.rows == (("Check", "Expected"), ("lag", "under 30 s"))


def test_markdown_and_chinese(parsed):
    doc = parsed["md"]
    _check_invariants(doc)
    assert doc.title == "Architecture" and {p.mode for p in doc.pages} == {"docling-markdown"}
    assert len(doc.pages) == 3
    assert _page_with(doc, "Kafka topics have 24 partitions.") == [1]
    code = next(b for b in doc.pages[1].blocks if b.kind == "code")
    assert code.text == "retention_days: 35\nowner: analytics"
    assert next(b for b in doc.pages[1].blocks if b.kind == "list").text == "- gateway\n- uploader"
    assert next(b for b in doc.pages[2].blocks if b.kind == "table").rows == (("Component", "Tier"), ("router", "1"))

    zh = parsed["zh"]
    _check_invariants(zh)
    assert zh.title == "数据平台简介" and len(zh.pages) == 3
    assert _page_with(zh, "数据备份保留 35 天。") == [1]
    assert _page_with(zh, "向量检索服务基于 Milvus 构建。") == [2]


# ---------------------------------------------------------------------- paged formats


def test_pptx_slides_and_notes(parsed):
    doc = parsed["pptx"]
    _check_invariants(doc)
    assert len(doc.pages) == 3 and doc.title == "Quarterly Review"
    assert {p.mode for p in doc.pages} == {"docling-pptx"}
    assert doc.pages[1].blocks[0] == Block("heading", "Performance", level=1)
    assert _page_with(doc, "Latency dropped to 180 ms") == [1]
    assert doc.pages[1].blocks[-1] == Block("paragraph", "Notes: Cache win.")
    assert not any(b.text.startswith("Notes:") for p in (doc.pages[0], doc.pages[2]) for b in p.blocks)


def test_xlsx_sheet_pages(parsed):
    doc = parsed["xlsx"]
    _check_invariants(doc)
    assert len(doc.pages) == 2 and {p.mode for p in doc.pages} == {"docling-xlsx"}
    assert doc.pages[0].blocks[0] == Block("heading", "Compute", level=1)
    assert doc.pages[0].blocks[1].rows == (("Team", "Cost"), ("Search", "18420"))
    assert doc.pages[1].blocks[1].text == "| Team | Tier | TB |\n| Analytics | Archive | 310 |"


def test_csv_row_ranges(parsed):
    doc = parsed["csv"]
    _check_invariants(doc)
    assert len(doc.pages) == 3 and {p.mode for p in doc.pages} == {"docling-csv"}
    sizes = [len(p.blocks[0].rows) for p in doc.pages]
    assert sizes == [51, 51, 21]  # header + 50/50/20 data rows
    assert all(p.blocks[0].rows[0] == ("id", "name", "score") for p in doc.pages)
    assert _page_with(doc, "| 60 | name60 | 120 |") == [1]


# ------------------------------------------------------------------------ text and code


def test_code_and_text(parsed):
    code = parsed["py"]
    _check_invariants(code)
    assert code.source_kind == "code" and code.mime == "text/x-python"
    assert {(p.parser, p.mode) for p in code.pages} == {("plain-text", "code-definitions")}
    assert [p.label for p in code.pages] == ["lines 1-59", "lines 61-119", "lines 121-121"]
    assert len(code.pages) == 3  # 122 lines, ~60 a page, cut at blank lines
    assert all(b.kind == "code" for p in code.pages for b in p.blocks)
    assert code.pages[0].blocks[0].text == "def f0(x):\n    return x + 0"  # indentation kept
    assert _page_with(code, "print('end of tool')") == [2]

    text = parsed["txt"]
    _check_invariants(text)
    assert text.pages[0].blocks == [
        Block("paragraph", "Caf\xe9 notes second line of the first paragraph"),
        Block("paragraph", "Second paragraph."),
    ]
    assert text.warnings and "not UTF-8" in text.warnings[0]


# --------------------------------------------------------------------------- the corpus


@pytest.mark.skipif(not CORPUS.is_dir() or not any(CORPUS.iterdir()), reason="examples/corpus not generated")
def test_sample_corpus():
    expected = {
        "platform-handbook.pdf": [
            (0, "The platform serves 42 internal teams from two regions, eu-west and us-east."),
            (1, "Cold storage objects move to the archive tier after 90 days."),
            (2, "The on-call rotation changes every Tuesday at 09:00 UTC."),
            (3, "Backups are kept for 35 days."),
            (5, "Every schema migration needs a rollback script."),
        ],
        "quarterly-review.pptx": [
            (1, "Notes: The latency win came mostly from the new result cache in the query router."),
            (3, "Storage spend fell 12% after enabling the archive tier"),
        ],
        "cost-report.xlsx": [
            (0, "| Search | 2024-08 | 41200 | 18420 |"),
            (1, "| Analytics | 2024-09 | Archive | 310 | 1240 |"),
        ],
        "service-catalog.csv": [(0, "| vector-search | Search | 1 | #oncall-search |")],
    }
    for path in sorted(CORPUS.iterdir()):
        if path.name.startswith("."):
            continue
        doc = parse_document(path)
        _check_invariants(doc)
        assert doc.pages and all(p.parser == "docling" for p in doc.pages), path.name
        for page_index, needle in expected.get(path.name, []):
            assert page_index in _page_with(doc, needle), (path.name, needle)
        if path.suffix == ".pdf":
            assert len(doc.pages) == 6
            headings = [b.text for p in doc.pages for b in p.blocks if b.kind == "heading"]
            assert "2.1 Object Storage" in headings and "6 Change Management" in headings
            assert not any(re.search(r"Page \d of 6|Internal - v3\.2", p.text) for p in doc.pages)
            assert doc.pages[0].blocks[0] == Block("heading", "Northwind Data Platform Handbook", level=1)
