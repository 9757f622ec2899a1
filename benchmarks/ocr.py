"""OCR engines side by side on scans of real manuals (figures printed; not a timed test).

    .venv/bin/python benchmarks/ocr.py [--cache ~/.cache/kb-assets/dev-corpus] [--engines rapidocr,tesseract]

Scans: pages 9-11 of R-data.pdf (English) and pages 11-12 of the Chinese Debian Edu manual, each
rendered at 300 dpi (grayscale) into an image-only PDF and parsed by ``parse_document`` with
``ParseOptions(ocr_engine=...)`` (``bench_ocr`` in parsing.py). Recall against the PDFs' own text
layer: English words (multiset, running header/footer lines the parser removed left out), Chinese
characters. Seconds a page: wall time of the parse (layout pass included) over the pages, the engine
loaded before the clock starts; in brackets the process's CPU seconds a page (all threads:
onnxruntime uses both cores, tesserocr one). Load: the 1-minute load average before and after each
run (2 cores: over ~2 means other work shared the CPUs, and wall times grow with it). An engine that
is not installed is listed with the reason. tesseract is the optional engine: ``pip install
'.[tesseract]'`` and Debian's ``tesseract-ocr-eng tesseract-ocr-chi-sim``.

Measured 2026-12-01, 2 cores (AMD EPYC), rapidocr 3.10.0 (PP-OCRv6 small) + onnxruntime 1.32.0,
tesserocr 2.13.0 + Debian's tesseract 5.3.0 (eng, chi_sim); the machine was shared (other test and
benchmark runs), so the seconds are upper bounds, the recall figures are exact:

| engine | English recall mean / worst page | s/page (CPU s) | load | Chinese recall mean / worst page | s/page (CPU s) | load |
|---|---|---|---|---|---|---|
| rapidocr | 99.9% / 99.8% | 15.51 | 2.21 -> 2.50 | 100.0% / 100.0% | 10.13 | 2.50 -> 2.58 |
| tesseract | 98.1% / 95.6% | 2.15 | 2.58 -> 2.34 | 98.9% / 98.2% | 5.31 | 2.34 -> 2.21 |
| rapidocr | 99.9% / 99.8% | 45.64 (22.99) | 5.29 -> 7.11 | 100.0% / 100.0% | 41.42 (23.07) | 7.34 -> 6.75 |
| tesseract | 98.1% / 95.6% | 5.67 (2.72) | 6.75 -> 6.55 | 98.9% / 98.2% | 13.2 (5.58) | 6.55 -> 6.89 |

(The first two rows predate the CPU column.) rapidocr reads more (every page >= 99.8%), tesseract
is 3-8x faster on English and 2-3x on Chinese. Less disturbed by load, the engine calls alone with
one thread each (onnxruntime ``intra_op_num_threads=1``), CPU seconds a page, load 5-8: rapidocr
13.9 (English) / 16.6 (Chinese), tesseract 2.6 / 5.6. On a quiet machine (load < 1) rapidocr took
7.8-7.9 s for R-data page 9 alone with both cores (detection 1.7 s, recognition 6.2 s). These three
were measured with throwaway scripts, not this one.
"""  # noqa: E501 (the table of figures: one row a line)

from __future__ import annotations

import argparse
from pathlib import Path

from parsing import PDFS, REPO, ZH_PDF, bench_ocr  # benchmarks/parsing.py: this script's folder is first on sys.path

EN_PAGES = [8, 9, 10]  # 0-based: R-data pages 9-11
ZH_PAGES = [10, 11]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    parser.add_argument("--engines", default="rapidocr,tesseract")
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    if not (cache / PDFS[0]).exists() or not (cache / ZH_PDF).exists():
        from dev_corpus import fetch

        fetch(cache)

    from kb_assets.parsing import parse_document
    from kb_assets.parsing.ocr import ocr_unavailable

    parse_document(REPO / "examples" / "corpus" / "platform-handbook.pdf")  # docling set-up, not timed
    print(
        "| engine | English recall mean / worst page | s/page (CPU s) | load | Chinese recall mean / worst page "
        "| s/page (CPU s) | load |"
    )
    print("|---|---|---|---|---|---|---|")
    for engine in args.engines.split(","):
        reason = ocr_unavailable(engine, "eng+chi_sim")
        if reason:
            print(f"| {engine} | not run: {reason} | | | | | |", flush=True)
            continue
        en = bench_ocr(cache / PDFS[0], EN_PAGES, engine=engine)
        zh = bench_ocr(cache / ZH_PDF, ZH_PAGES, chinese=True, engine=engine)
        print(
            f"| {engine} | {en['recall_mean']}% / {en['recall_min']}% "
            f"| {en['seconds_per_page']} ({en['cpu_seconds_per_page']}) | {en['load']} "
            f"| {zh['recall_mean']}% / {zh['recall_min']}% "
            f"| {zh['seconds_per_page']} ({zh['cpu_seconds_per_page']}) | {zh['load']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
