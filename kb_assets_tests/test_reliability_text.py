"""Text that does not decode as text is refused with a reason, instead of being published as mojibake;
text in a known encoding (UTF-16 with a byte order mark, latin-1/cp1252, GBK) still reads exactly."""

from __future__ import annotations

import random

import pytest

from kb_assets.parsing import DocumentParseError, parse_document

FRENCH = "Le café est très élégant, à côté de la forêt.\n\nOù est la bibliothèque ? Çà et là, un garçon naïf.\n"
GERMAN = "Die Bäckerei in München verkauft „Brötchen“ – 5 Stück für 2 €.\n"


def noise(seed: int, size: int = 6000) -> bytes:
    """Random bytes without NUL (so that sniffing alone does not call them binary)."""
    rng = random.Random(seed)
    return bytes(rng.randint(1, 255) for _ in range(size))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes_in_a_text_file_are_refused_with_a_reason(tmp_path, seed):
    for name in ("noise.txt", "noise.md", "noise.csv", "noise.py"):
        (tmp_path / name).write_bytes(noise(seed))
        with pytest.raises(DocumentParseError, match=rf"^{name.replace('.', '[.]')}: not text in a known encoding \("):
            parse_document(tmp_path / name)


def test_latin1_cp1252_and_utf16_text_still_read_exactly(tmp_path):
    (tmp_path / "cafe.txt").write_bytes(FRENCH.encode("latin-1"))
    doc = parse_document(tmp_path / "cafe.txt")
    assert doc.pages[0].text == FRENCH.strip()
    assert [w for w in doc.warnings if w.startswith("not UTF-8")] == [
        "not UTF-8: decoded as cp1252 (detected by charset-normalizer)"
    ]

    (tmp_path / "baeckerei.md").write_bytes(GERMAN.encode("cp1252"))
    assert GERMAN.strip() in parse_document(tmp_path / "baeckerei.md").pages[0].text

    (tmp_path / "wide.txt").write_bytes(FRENCH.encode("utf-16"))  # with its byte order mark
    doc = parse_document(tmp_path / "wide.txt")
    assert doc.pages[0].text == FRENCH.strip() and "not UTF-8: decoded as utf-16 (byte order mark)" in doc.warnings


def test_ingest_fails_noise_with_its_reason_and_publishes_the_latin1_file(tmp_path, settings, catalog):
    from kb_assets.launch.ingest import ingest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "cafe.txt").write_bytes(FRENCH.encode("latin-1"))
    (folder / "noise.txt").write_bytes(noise(7))
    report = ingest([folder], "encodings", settings)
    docs = {d.source_path: d for d in catalog.list_documents(["encodings"])}
    (failure,) = report.failures
    assert failure.document_id == docs["noise.txt"].document_id
    assert failure.reason.startswith("noise.txt: not text in a known encoding (")
    assert docs["noise.txt"].status == "failed" and catalog.read_pages(docs["noise.txt"].document_id) == []
    assert docs["cafe.txt"].status == "published"
    assert catalog.read_pages(docs["cafe.txt"].document_id)[0]["text"] == FRENCH.strip()
