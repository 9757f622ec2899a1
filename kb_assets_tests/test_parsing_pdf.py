"""PDF parsing beyond text lines, with real docling, pypdfium2 and tesseract (no mocks): tables without
models, figures and page images, OCR of scanned pages (English and Chinese), printed page labels,
per-chapter running headers, and the choice of docling's pipeline."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kb_assets.parsing import Block, ParseOptions, parse_document
from kb_assets.parsing.converter import LAYOUT_MODEL_FOLDER, choose_pdf_pipeline
from kb_assets.parsing.ocr import ocr_unavailable

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"
CJK_FONT = any(Path(d).is_dir() for d in ("/usr/share/fonts/truetype/wqy", "/usr/share/fonts/opentype/noto"))
needs_ocr = pytest.mark.skipif(
    ocr_unavailable("eng+chi_sim") is not None,
    reason="tesseract (tesserocr + tesseract-ocr-eng/-chi-sim) is not installed",
)


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
    assert all(p.image_png and p.image_png.startswith(b"\x89PNG") for p in handbook.pages)
    from PIL import Image

    image = Image.open(io.BytesIO(handbook.pages[0].image_png))
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
    assert no_images.pages[0].image_png is None and no_images.pages[0].blocks[1].image_png is None


@pytest.fixture(scope="module")
def scanned_pdf(tmp_path_factory) -> Path:
    """Two pages rendered to 300-dpi images and wrapped as an image-only PDF (a scan): English with a
    table, then Chinese (reportlab's STSong-Light; pdfium draws it with a system CJK font)."""
    import pypdfium2 as pdfium
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
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
    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    c.setFont("STSong-Light", 14)
    c.drawString(72, 760, "数据备份保留三十五天。")
    c.drawString(72, 736, "向量检索服务基于开源软件构建。")
    c.showPage()
    c.save()
    pdf = pdfium.PdfDocument(str(source))
    images = [pdf[i].render(scale=300 / 72, grayscale=True).to_pil() for i in range(2)]
    pdf.close()
    scan = root / "scan.pdf"
    images[0].save(scan, format="PDF", resolution=300, save_all=True, append_images=images[1:])
    return scan


@pytest.fixture(scope="module")
def ocred(scanned_pdf):
    return parse_document(scanned_pdf, options=ParseOptions(images=False))


@needs_ocr
def test_scanned_english_page_is_ocred_into_blocks(ocred):
    assert [(p.parser, p.mode) for p in ocred.pages] == [("tesseract", "ocr-tesseract")] * 2
    english = _norm(ocred.pages[0].text)
    assert "Backups are kept for 35 days in the archive tier." in english
    assert "Restores are tested every quarter" in english
    assert ocred.pages[0].blocks[0] == Block("heading", "Backup Policy", level=1)  # larger text: a heading


@needs_ocr
@pytest.mark.skipif(not CJK_FONT, reason="no CJK font for pdfium to draw the Chinese test scan (fonts-wqy-microhei)")
def test_scanned_chinese_page_is_ocred(ocred):
    chinese = _norm(ocred.pages[1].text)
    assert "数据备份保留三十五天" in chinese
    assert "向量检索服务基于开源软件构建" in chinese  # no spaces between CJK characters


@needs_ocr
def test_image_file_is_ocred(tmp_path, scanned_pdf):
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(scanned_pdf))
    pdf[0].render(scale=1.0).to_pil().save(tmp_path / "note.png")  # the scan is 300 dpi: scale 1 keeps it
    pdf.close()
    doc = parse_document(tmp_path / "note.png")
    assert doc.source_kind == "image" and doc.mime == "image/png"
    assert [p.mode for p in doc.pages] == ["ocr-tesseract"]
    assert "Backups are kept for 35 days" in doc.pages[0].text
    assert doc.pages[0].image_png.startswith(b"\x89PNG")


def test_scan_without_ocr_is_recorded_not_silent(scanned_pdf):
    doc = parse_document(scanned_pdf, options=ParseOptions(ocr=False, images=False))
    assert [p.mode for p in doc.pages] == ["docling-native-pdf-no-text"] * 2
    assert all(p.blocks == [] for p in doc.pages)
    assert any("no text layer and OCR is switched off" in w for w in doc.warnings)


def test_per_chapter_running_headers_are_removed_headings_kept(tmp_path):
    """"Chapter 2: R Basics 4"-style headers change per chapter and carry the page number."""
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


def test_broken_layout_model_falls_back_to_native_and_says_so(tmp_path, handbook):
    models = _fake_layout_model(tmp_path / "models")
    doc = parse_document(CORPUS / "platform-handbook.pdf", options=ParseOptions(docling_artifacts_path=models, images=False))
    assert {p.mode for p in doc.pages} == {"docling-native-pdf"}
    assert any(w.startswith("docling layout pipeline failed") and "native pipeline" in w for w in doc.warnings)
    assert [p.text for p in doc.pages] == [p.text for p in handbook.pages]

    doc = parse_document(CORPUS / "platform-handbook.pdf", options=ParseOptions(docling_artifacts_path=tmp_path / "none"))
    assert any("has no docling-project--docling-layout-heron" in w for w in doc.warnings)


def test_parse_options_from_settings():
    from kb_assets.settings import Settings

    settings = Settings.from_env({
        "KB_HOME": "/tmp/kb", "KB_PARSE_MAX_FILE_BYTES": "1000", "KB_PARSE_MAX_PAGES": "3",
        "KB_PARSE_MAX_UNPACKED_BYTES": "5000", "KB_OCR_LANGUAGES": "eng", "DOCLING_ARTIFACTS_PATH": "/models",
    })
    options = settings.parse
    assert (options.max_file_bytes, options.max_pages, options.max_unpacked_bytes) == (1000, 3, 5000)
    assert options.ocr_languages == "eng" and options.docling_artifacts_path == Path("/models")
    assert Settings.from_env({"KB_HOME": "/tmp/kb"}).parse == ParseOptions()
