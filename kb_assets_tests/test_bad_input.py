"""Bad input: every case is a clear DocumentParseError naming the file and the reason (or, for a
known format under the wrong extension / a non-UTF-8 text, a parse with a warning). Real files,
real parsers."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from kb_assets.parsing import DocumentParseError, ParseOptions, parse_document

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"


@pytest.fixture(scope="module")
def docx_bytes() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading("Leave Policy", 1)
    d.add_paragraph("Requests go to the team lead two weeks ahead.")
    buffer = io.BytesIO()
    d.save(buffer)
    return buffer.getvalue()


def test_pdf_named_docx_is_parsed_as_pdf_with_a_warning(tmp_path):
    disguised = tmp_path / "handbook.docx"
    disguised.write_bytes((CORPUS / "platform-handbook.pdf").read_bytes())
    doc = parse_document(disguised, options=ParseOptions(images=False))
    assert doc.source_kind == "pdf" and len(doc.pages) == 6
    assert doc.warnings[0] == "the extension is .docx but the content is a PDF: parsed as a PDF"


def test_docx_named_pptx_is_parsed_as_docx(tmp_path, docx_bytes):
    disguised = tmp_path / "slides.pptx"
    disguised.write_bytes(docx_bytes)
    doc = parse_document(disguised)
    assert doc.source_kind == "docx" and "Requests go to the team lead" in doc.pages[0].text
    assert "content is a Word document (DOCX)" in doc.warnings[0]


def test_text_named_pdf_and_unknown_binary_are_refused(tmp_path):
    fake = tmp_path / "scan.pdf"
    fake.write_text("Dear team, the report follows.")
    with pytest.raises(DocumentParseError, match=r"^scan\.pdf: not a valid PDF file: the content is text$"):
        parse_document(fake)
    blob = tmp_path / "notes.md"
    blob.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(200))
    with pytest.raises(DocumentParseError, match=r"^notes\.md: binary content that is no supported format"):
        parse_document(blob)


def test_legacy_and_encrypted_office_files_are_refused(tmp_path, docx_bytes):
    import msoffcrypto.format.ooxml

    encrypted = tmp_path / "salaries.docx"
    with open(encrypted, "wb") as out:
        msoffcrypto.format.ooxml.OOXMLFile(io.BytesIO(docx_bytes)).encrypt("secret", out)
    with pytest.raises(DocumentParseError, match=r"^salaries\.docx: password-protected \(encrypted\) Office document"):
        parse_document(encrypted)

    legacy = tmp_path / "old.docx"  # an OLE2 compound file (Word 97-2003) under a .docx name
    legacy.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    with pytest.raises(DocumentParseError, match=r"^old\.docx: legacy Office 97-2003 binary file"):
        parse_document(legacy)

    zipped = tmp_path / "book.xlsx"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("readme.txt", "not a workbook")
    with pytest.raises(DocumentParseError, match=r"^book\.xlsx: not a valid XLSX file \(a ZIP archive"):
        parse_document(zipped)


def test_truncated_docx_is_refused(tmp_path, docx_bytes):
    truncated = tmp_path / "guide.docx"
    truncated.write_bytes(docx_bytes[: len(docx_bytes) // 2])
    with pytest.raises(DocumentParseError, match=r"^guide\.docx: not a valid DOCX file"):
        parse_document(truncated)


def test_decompression_bombs_and_size_limits_are_refused(tmp_path, docx_bytes):
    bomb = tmp_path / "bomb.docx"  # a real DOCX with one part that unpacks 11 MB from a few KB
    with zipfile.ZipFile(io.BytesIO(docx_bytes)) as source, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        for item in source.infolist():
            out.writestr(item, source.read(item))
        out.writestr("word/media/padding.bin", bytes(11 * 1024 * 1024))
    with pytest.raises(DocumentParseError, match=r"^bomb\.docx: part 'word/media/padding\.bin' unpacks \d+x"):
        parse_document(bomb)

    normal = tmp_path / "normal.docx"
    normal.write_bytes(docx_bytes)
    with pytest.raises(DocumentParseError, match=r"^normal\.docx: unpacks to \d+ bytes, over the limit of 1000"):
        parse_document(normal, options=ParseOptions(max_unpacked_bytes=1000))
    with pytest.raises(DocumentParseError, match=r"^normal\.docx: file is \d+ bytes, over the limit of 100 \(KB_PARSE"):
        parse_document(normal, options=ParseOptions(max_file_bytes=100))
    with pytest.raises(DocumentParseError, match=r"^platform-handbook\.pdf: PDF has 6 pages, over the limit of 5"):
        parse_document(CORPUS / "platform-handbook.pdf", options=ParseOptions(max_pages=5))

    from PIL import Image

    Image.new("L", (400, 300), 255).save(tmp_path / "huge.png")
    with pytest.raises(
        DocumentParseError, match=r"^huge\.png: image of 400x300 pixels is over the limit of 1000 pixels"
    ):
        parse_document(tmp_path / "huge.png", options=ParseOptions(max_image_pixels=1000))
    # the limits come before anything that depends on the machine: also where OCR cannot run
    with pytest.raises(DocumentParseError, match=r"^huge\.png: image of 400x300 pixels is over the limit"):
        parse_document(tmp_path / "huge.png", options=ParseOptions(max_image_pixels=1000, ocr=False))
    frames = [Image.new("L", (40, 30), 255) for _ in range(3)]
    frames[0].save(tmp_path / "pages.tif", save_all=True, append_images=frames[1:])
    with pytest.raises(DocumentParseError, match=r"^pages\.tif: image has 3 frames, over the limit of 2 pages"):
        parse_document(tmp_path / "pages.tif", options=ParseOptions(max_pages=2, ocr=False))


def test_non_utf8_markdown_csv_and_html_are_decoded(tmp_path):
    md = tmp_path / "说明.md"
    md.write_bytes("# 数据平台\n\n数据备份保留三十五天，由存储团队负责。\n".encode("gbk"))
    doc = parse_document(md)
    assert "数据备份保留三十五天，由存储团队负责。" in doc.pages[0].text
    assert any(w.startswith("not UTF-8: decoded as gb") for w in doc.warnings)

    csv = tmp_path / "cafes.csv"
    csv.write_bytes("name,city\nCafé Müller,Köln\nBäckerei Süß,München\n".encode("cp1252"))
    doc = parse_document(csv)
    assert doc.pages[0].blocks[0].rows == (("name", "city"), ("Café Müller", "Köln"), ("Bäckerei Süß", "München"))
    assert any(w.startswith("not UTF-8") for w in doc.warnings)

    html = tmp_path / "page.html"
    html.write_bytes(
        '<html><head><meta charset="gbk"><title>说明</title></head><body><h1>存储</h1>'
        "<p>数据备份保留三十五天。</p></body></html>".encode("gbk")
    )
    doc = parse_document(html)
    assert "数据备份保留三十五天。" in doc.pages[0].text
