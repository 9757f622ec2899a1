"""Chunk regions on the sample corpus's PDF, checked by an independent extraction (issue 14): pypdfium2's
word boxes of each chunk's words fall inside the chunk's regions, and every region lies inside its page.
The same measure on the R manuals is ``benchmarks/regions.py``."""

from __future__ import annotations

from kb_assets_tests.region_check import measure


def test_pdf_chunk_regions_hold_their_words_by_pypdfium2s_word_boxes(handbook, catalog, lake, corpus_dir):
    pdf = next(d for d in catalog.list_documents(["handbook"]) if d.source_path == "platform-handbook.pdf")
    chunks = list(lake.read("chunks", pdf.document_id).sort("chunk_index").iter_rows(named=True))
    result = measure(corpus_dir / "platform-handbook.pdf", chunks)
    print(result)
    assert result["chunks"] and result["scored"] >= result["chunks"] * 0.8, result
    assert result["without_regions"] == 0 and result["outside_page"] == 0, result
    assert result["mean"] >= 0.95 and result["min"] >= 0.7, result["worst"]
    assert result["control_mean"] < 0.5, result  # the measure can fail: other chunks' regions do
