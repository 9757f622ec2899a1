"""PDF parsing beyond text lines, with real docling, pypdfium2 and OCR (no mocks): tables without
models, figures and page images, OCR of scanned pages (English and Chinese) with the default engine
(rapidocr, installed by the project) and with tesseract where it is installed, printed page labels,
per-chapter running headers, text past the page edge, and the choice of docling's pipeline."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kb_assets.parsing import Block, ParseOptions, parse_document
from kb_assets.parsing.ocr import ocr_unavailable
from kb_assets.parsing.pdf.layout_model import LAYOUT_MODEL_FOLDER, choose_pdf_pipeline

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"
# tesseract is an option, not installed by the project: its test runs only where it is installed
NO_TESSERACT = ocr_unavailable("tesseract", "eng+chi_sim")


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def handbook():
    return parse_document(CORPUS / "platform-handbook.pdf")


def test_table_is_kept_whole_with_its_header(handbook):
    page = handbook.pages[3]
    tables = [b for b in page.blocks if b.kind == "table"]
    assert len(tables) == 1
    table = tables[0]
    assert table.rows[0] == ("Data class", "Retention", "Owner")
    assert ("Audit logs", "400 days", "Security Engineering") in table.rows
    assert len(table.rows) == 7 and all(len(row) == 3 for row in table.rows)
    assert table.text.splitlines()[0] == "| Data class | Retention | Owner |"
    # the prose around it is not swallowed by the table
    assert any(b.kind == "paragraph" and b.text.startswith("Legal holds override the schedule") for b in page.blocks)
    assert sum(b.kind == "table" for p in handbook.pages for b in p.blocks) == 1


def test_page_images_and_printed_labels(handbook):
    from PIL import Image

    from kb_assets.parsing.render import render_page_images

    renders = render_page_images((CORPUS / "platform-handbook.pdf").read_bytes(), "pdf", list(range(6)))
    assert sorted(renders) == list(range(6)) and all(png.startswith(b"\x89PNG") for png in renders.values())
    image = Image.open(io.BytesIO(renders[0]))
    assert image.size[0] in (595, 596) and image.size[1] == 842  # A4 at 72 dpi
    # no /PageLabels in this PDF: the footer "Page 4 of 6" gives the printed label, and is removed
    assert [p.label for p in handbook.pages] == ["1", "2", "3", "4", "5", "6"]
    assert "Page 4 of 6" in handbook.pages[3].removed and "Page 4 of 6" not in handbook.pages[3].text


@pytest.fixture(scope="module")
def figure_pdf(tmp_path_factory) -> Path:
    from PIL import Image
    from reportlab.pdfgen import canvas

    root = tmp_path_factory.mktemp("figures")
    Image.new("RGB", (120, 80), (30, 90, 200)).save(root / "chart.png")
    Image.new("RGB", (10, 10), (0, 0, 0)).save(root / "icon.png")
    path = root / "report.pdf"
    c = canvas.Canvas(str(path))
    c.drawString(72, 760, "Ingestion overview for the quarter.")
    c.drawImage(str(root / "icon.png"), 500, 770, 12, 12)  # an icon: too small to be a figure
    c.drawImage(str(root / "chart.png"), 72, 450, 300, 200)
    c.drawString(72, 432, "Figure 3: Events ingested per day")
    c.drawString(72, 400, "The peak came on the last day of the quarter.")
    c.showPage()
    c.save()
    return path


def test_figure_block_with_caption_and_crop(figure_pdf):
    doc = parse_document(figure_pdf)
    page = doc.pages[0]
    assert [b.kind for b in page.blocks] == ["paragraph", "figure", "paragraph"]
    figure = page.blocks[1]
    assert figure == Block("figure", "Figure 3: Events ingested per day")  # the caption is the figure's text
    from PIL import Image

    crop = Image.open(io.BytesIO(figure.image_png))
    assert crop.size == (600, 400)  # 300 x 200 pt at 144 dpi
    assert crop.convert("RGB").getpixel((300, 200)) == (30, 90, 200)
    assert page.text.count("Figure 3") == 1
    no_images = parse_document(figure_pdf, options=ParseOptions(images=False))
    assert no_images.pages[0].blocks[1].image_png is None


@pytest.fixture(scope="module")
def scanned_pdf(tmp_path_factory) -> Path:
    """Two pages as 300-dpi images wrapped in an image-only PDF (a scan): English with a heading,
    drawn by reportlab and rendered by pdfium (its built-in Helvetica), then Chinese, drawn by PIL with
    Noto Sans SC from the ``pylopdf-fonts-zh-cn`` wheel (dev extra): no system font is needed."""
    import pylopdf_fonts_zh_cn
    import pypdfium2 as pdfium
    from PIL import Image, ImageDraw, ImageFont
    from reportlab.pdfgen import canvas

    root = tmp_path_factory.mktemp("scan")
    source = root / "source.pdf"
    c = canvas.Canvas(str(source))
    c.setFont("Helvetica-Bold", 18)
    c.drawString(72, 760, "Backup Policy")
    c.setFont("Helvetica", 12)
    c.drawString(72, 730, "Backups are kept for 35 days in the archive tier.")
    c.drawString(72, 714, "Restores are tested every quarter by the storage team.")
    c.showPage()
    c.save()
    pdf = pdfium.PdfDocument(str(source))
    english = pdf[0].render(scale=300 / 72, grayscale=True).to_pil()
    pdf.close()
    chinese = Image.new("L", english.size, 255)
    draw = ImageDraw.Draw(chinese)
    font = ImageFont.truetype(str(pylopdf_fonts_zh_cn.sans_path()), size=round(14 * 300 / 72))  # 14 pt
    draw.text((300, 130), "数据备份保留三十五天。", font=font, fill=0)
    draw.text((300, 230), "向量检索服务基于开源软件构建。", font=font, fill=0)
    scan = root / "scan.pdf"
    english.save(scan, format="PDF", resolution=300, save_all=True, append_images=[chinese])
    return scan


@pytest.fixture(scope="module")
def ocred(scanned_pdf):
    return parse_document(scanned_pdf, options=ParseOptions(images=False))


@pytest.mark.slow  # OCR engines and docling models load: seconds, not a fast-tier test
def test_scanned_english_page_is_ocred_into_blocks(ocred):
    assert [(p.parser, p.mode) for p in ocred.pages] == [("rapidocr", "ocr-rapidocr")] * 2
    english = _norm(ocred.pages[0].text)
    assert "Backups are kept for 35 days in the archive tier." in english
    assert "Restores are tested every quarter" in english
    assert ocred.pages[0].blocks[0] == Block("heading", "Backup Policy", level=1)  # larger text: a heading
    assert ocred.warnings == []


@pytest.mark.slow  # OCR engines and docling models load: seconds, not a fast-tier test
def test_scanned_chinese_page_is_ocred(ocred):
    chinese = _norm(ocred.pages[1].text)
    assert "数据备份保留三十五天" in chinese
    assert "向量检索服务基于开源软件构建" in chinese  # no spaces between CJK characters


@pytest.mark.slow  # OCR engines and docling models load: seconds, not a fast-tier test
def test_image_file_is_ocred(tmp_path, scanned_pdf):
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(scanned_pdf))
    pdf[0].render(scale=300 / 72).to_pil().save(tmp_path / "note.png")  # the scan's 300-dpi pixels
    pdf.close()
    doc = parse_document(tmp_path / "note.png")
    assert doc.source_kind == "image" and doc.mime == "image/png"
    assert [(p.parser, p.mode) for p in doc.pages] == [("rapidocr", "ocr-rapidocr")]
    assert "Backups are kept for 35 days" in doc.pages[0].text
    from kb_assets.parsing.render import render_page_images

    assert render_page_images((tmp_path / "note.png").read_bytes(), "image", [0])[0].startswith(b"\x89PNG")


@pytest.mark.slow  # OCR engines and docling models load: seconds, not a fast-tier test
def test_rapidocr_reads_with_the_models_in_its_wheel_offline(tmp_path, scanned_pdf, monkeypatch):
    """A fresh engine (no cached one) with every network connection refused: nothing is downloaded."""
    import socket

    import pypdfium2 as pdfium

    from kb_assets.parsing import ocr

    def refuse(*args, **kwargs):
        raise OSError("network refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    ocr.forget_engines()
    pdf = pdfium.PdfDocument(str(scanned_pdf))
    image = pdf[1].render(scale=300 / 72, grayscale=True).to_pil()  # the 300-dpi pixels of the scan
    pdf.close()
    cells = ocr.ocr_lines(image, "rapidocr", "eng+chi_sim")
    assert [c.text for c in cells] == ["数据备份保留三十五天。", "向量检索服务基于开源软件构建。"]
    first, second = cells
    assert 280 <= first.l < 320 and 110 <= first.t < 160 < first.b < second.t  # pixels, top-left origin


@pytest.mark.slow
@pytest.mark.skipif(NO_TESSERACT is not None, reason=f"KB_OCR_ENGINE=tesseract is not installed here: {NO_TESSERACT}")
def test_tesseract_engine_reads_the_scan(scanned_pdf):
    doc = parse_document(scanned_pdf, options=ParseOptions(images=False, ocr_engine="tesseract"))
    assert [(p.parser, p.mode) for p in doc.pages] == [("tesseract", "ocr-tesseract")] * 2
    assert "Backups are kept for 35 days in the archive tier." in _norm(doc.pages[0].text)
    assert "向量检索服务基于开源软件构建" in _norm(doc.pages[1].text)


def test_unusable_ocr_engine_is_recorded_not_silent(scanned_pdf):
    doc = parse_document(scanned_pdf, options=ParseOptions(images=False, ocr_engine="easyocr"))
    assert [p.mode for p in doc.pages] == ["docling-native-pdf-no-text"] * 2
    assert any("unknown OCR engine 'easyocr' (KB_OCR_ENGINE: rapidocr or tesseract)" in w for w in doc.warnings)


def test_scan_without_ocr_is_recorded_not_silent(scanned_pdf):
    doc = parse_document(scanned_pdf, options=ParseOptions(ocr=False, images=False))
    assert [p.mode for p in doc.pages] == ["docling-native-pdf-no-text"] * 2
    assert all(p.blocks == [] for p in doc.pages)
    assert any("no text layer and OCR is switched off" in w for w in doc.warnings)


def test_table_rows_are_not_mixed_when_cells_run_together(tmp_path):
    """A line with fewer cells than a table row continues the row above only when it stays inside the
    columns (a wrapped cell); one that runs on past the next column's start is a row of its own (the
    text layer merged its cells), and a code line after the table is not swallowed."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "leaders.pdf"
    c = canvas.Canvas(str(path), pagesize=(595.28, 841.89))
    c.setFont("Helvetica", 10)
    c.drawString(72, 780, "Some project leaders and the month they took office are listed below.")
    rows = [
        ("Ian", "Murdock August 1993"),
        ("Bruce Perens", "April 1996"),
        ("Ian", "Jackson January 1998"),
        ("Wichert Akkerman January 1999", None),
        ("Ben", "Collins April 2001"),
        ("Bdale", "Garbee April 2002"),
        ("Martin Michlmayr March 2003", None),
    ]
    y = 750
    for left, right in rows:
        c.drawString(72, y, left)
        if right is not None:
            c.drawString(160, y, right)
        else:  # one cell running on past the second column's start
            assert 72 + c.stringWidth(left, "Helvetica", 10) > 175
        y -= 13
        if left == "Bruce Perens":  # a wrapped cell: inside the second column, right under its row
            c.drawString(160, y, "(second term)")
            y -= 13
    c.drawString(72, y - 12, "$ awk '{ print $3 }' leaders.txt prints the third field of every line")
    c.showPage()
    c.save()
    page = parse_document(path, options=ParseOptions(images=False)).pages[0]
    tables = [b for b in page.blocks if b.kind == "table"]
    assert len(tables) == 1
    table_rows = [tuple(cell for cell in row if cell) for row in tables[0].rows]
    assert table_rows == [
        ("Ian", "Murdock August 1993"),
        ("Bruce Perens", "April 1996 (second term)"),
        ("Ian", "Jackson January 1998"),
        ("Wichert Akkerman January 1999",),
        ("Ben", "Collins April 2001"),
        ("Bdale", "Garbee April 2002"),
        ("Martin Michlmayr March 2003",),
    ]
    code = [b for b in page.blocks if "awk" in b.text]
    assert len(code) == 1 and code[0].kind == "paragraph"


def test_per_chapter_running_headers_are_removed_headings_kept(tmp_path):
    """ "Chapter 2: R Basics 4"-style headers change per chapter and carry the page number."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "manual.pdf"
    c = canvas.Canvas(str(path))
    chapters = ["Chapter 1: Getting Started"] * 4 + ["Chapter 2: R Basics"] * 4
    for p, chapter in enumerate(chapters):
        c.setFont("Helvetica", 9)
        c.drawString(72, 800, f"{chapter} {p + 1}")
        if p in (0, 4):
            c.setFont("Helvetica-Bold", 16)
            c.drawString(72, 740, chapter)
        c.setFont("Helvetica", 11)
        for i in range(3):
            c.drawString(72, 700 - 14 * i, f"Text {i} on page {p + 1} explains one more thing about the language.")
        c.showPage()
    c.save()
    doc = parse_document(path, options=ParseOptions(images=False))
    assert all("R Basics 6" not in p.text and "Getting Started 2" not in p.text for p in doc.pages)
    assert doc.pages[4].blocks[0] == Block("heading", "Chapter 2: R Basics", level=1)
    assert doc.pages[5].removed == ("Chapter 2: R Basics 6",)
    assert [p.label for p in doc.pages] == [str(i) for i in range(1, 9)]


def test_text_past_the_page_edge_is_kept(tmp_path):
    """An overfull line runs off the page: docling-parse drops what lies past the edge, the parser
    takes it from pdfium's text layer and joins it to its line; nothing is read twice."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "overfull.pdf"
    c = canvas.Canvas(str(path), pagesize=(595.28, 841.89))
    c.setFont("Helvetica", 10)
    c.drawString(72, 760, "The installer reads its settings from one file only.")
    c.drawString(
        72,
        740,
        "Add the boot parameter mirror/http/proxy=http://10.0.2.2:3128 and the "
        "/etc/network/interfaces.d/ fragments to use the proxy.",
    )
    c.drawString(-40, 720, "leftover-prefix-token begins before the left edge of the page.")
    c.drawString(72, 700, "A last line stays inside the page.")
    c.showPage()
    c.save()
    text = _norm(parse_document(path, options=ParseOptions(images=False)).pages[0].text)
    assert (
        "mirror/http/proxy=http://10.0.2.2:3128 and the /etc/network/interfaces.d/ fragments to use the proxy." in text
    )
    assert "leftover-prefix-token begins before the left edge of the page." in text
    assert text.count("3128") == 1 and text.count("fragments") == 1 and text.count("leftover") == 1
    order = [text.index(words) for words in ("reads its settings", "mirror/http", "leftover", "A last line")]
    assert order == sorted(order)


# ----------------------------------------------------------------------- pipeline choice


def _fake_layout_model(root: Path) -> Path:
    """A folder shaped like docling's layout model (file names only: the weights are not real)."""
    folder = root / LAYOUT_MODEL_FOLDER
    folder.mkdir(parents=True)
    for name in ("config.json", "preprocessor_config.json", "model.safetensors"):
        (folder / name).write_text("{}")
    return root


def test_pipeline_choice_follows_the_model_folder(tmp_path):
    empty_cache = tmp_path / "cache"
    choice = choose_pdf_pipeline(None, default_cache=empty_cache)
    assert choice.kind == "native" and "no docling layout model" in choice.reason

    explicit = tmp_path / "artifacts"
    explicit.mkdir()
    choice = choose_pdf_pipeline(explicit)
    assert choice.kind == "native" and f"DOCLING_ARTIFACTS_PATH={explicit}" in choice.reason

    (explicit / LAYOUT_MODEL_FOLDER).mkdir()
    choice = choose_pdf_pipeline(explicit)
    assert choice.kind == "native" and "incomplete docling layout model" in choice.reason

    models = _fake_layout_model(tmp_path / "models")
    choice = choose_pdf_pipeline(models)
    assert (choice.kind, choice.artifacts_path) == ("layout", models)  # torch + transformers are installed
    assert choice.tables is False and "no TableFormer" in choice.reason
    assert choose_pdf_pipeline(None, default_cache=models).kind == "layout"  # docling's own cache counts too


@pytest.mark.slow  # OCR engines and docling models load: seconds, not a fast-tier test
def test_broken_layout_model_falls_back_to_native_and_says_so(tmp_path, handbook):
    models = _fake_layout_model(tmp_path / "models")
    doc = parse_document(
        CORPUS / "platform-handbook.pdf", options=ParseOptions(docling_artifacts_path=models, images=False)
    )
    assert {p.mode for p in doc.pages} == {"docling-native-pdf"}
    assert any(w.startswith("docling layout pipeline failed") and "native pipeline" in w for w in doc.warnings)
    assert [p.text for p in doc.pages] == [p.text for p in handbook.pages]

    doc = parse_document(
        CORPUS / "platform-handbook.pdf", options=ParseOptions(docling_artifacts_path=tmp_path / "none")
    )
    assert any("has no docling-project--docling-layout-heron" in w for w in doc.warnings)


def test_parse_options_from_settings():
    from kb_assets.settings import Settings

    settings = Settings.from_env(
        {
            "KB_HOME": "/tmp/kb",
            "KB_PARSE_MAX_FILE_BYTES": "1000",
            "KB_PARSE_MAX_PAGES": "3",
            "KB_PARSE_MAX_UNPACKED_BYTES": "5000",
            "KB_OCR_ENGINE": "tesseract",
            "KB_OCR_LANGUAGES": "eng",
            "DOCLING_ARTIFACTS_PATH": "/models",
        }
    )
    options = settings.parse
    assert (options.max_file_bytes, options.max_pages, options.max_unpacked_bytes) == (1000, 3, 5000)
    assert (options.ocr_engine, options.ocr_languages) == ("tesseract", "eng")
    assert options.docling_artifacts_path == Path("/models")
    assert ParseOptions().ocr_engine == "rapidocr"
    # the default parse workers are the cores (KB_PARSE_WORKERS unset): pinned, so the test holds on any machine
    assert Settings.from_env({"KB_HOME": "/tmp/kb", "KB_PARSE_WORKERS": "1"}).parse == ParseOptions()
