"""How fast and how faithful parsing is, on real manuals (figures printed; not a timed test).

    .venv/bin/python benchmarks/parsing.py [--cache ~/.cache/kb-assets/dev-corpus] [--ocr-pages 3]

Corpus: Debian's r-doc-pdf (R-data, R-admin, R-lang, R-exts) and debian-reference-en (PDF and HTML),
fetched with apt by ../shared/eval/fetch-corpus.sh into the cache (never committed).

Printed per PDF, in one run:
- pages/s of ``parse_document`` (with page images, as ``parsed_pages`` runs it, and without) beside
  raw pypdfium2 text extraction of the same file;
- page count against the PDF's;
- word share: per page, the share of the words of pypdfium2's text layer inside the page box (the
  reference, less the running header/footer lines the parser removed) found in the page text (multiset of lowercased
  words, NFKC, hyphenated line ends joined); mean, lowest page and pages >= 99% (goal: >= 99%);
- the parser modes and blocks found (tables, figures, headings).
Then, for each OCR engine installed here (rapidocr, tesseract), OCR word recall on scanned renders
(300 dpi, image-only PDF) of a few pages of R-data (English, goal >= 90%) and, when the Chinese Debian
Edu manual is in the cache, character recall on two of its pages (benchmarks/ocr.py prints only
these, as a table); and the HTML chapters of debian-reference (logical pages, pages/s, word share against the
HTML's own text).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PDFS = [
    "usr/share/R/doc/manual/R-data.pdf",
    "usr/share/R/doc/manual/R-admin.pdf",
    "usr/share/R/doc/manual/R-lang.pdf",
    "usr/share/R/doc/manual/R-exts.pdf",
    "usr/share/debian-reference/debian-reference.en.pdf",
]
HTML_GLOB = "usr/share/debian-reference/*.en.html"
ZH_PDF = "usr/share/doc/debian-edu-doc-zh-cn/debian-edu-bookworm-manual.pdf"
_WORD = re.compile(r"\w+")
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")


def words(text: str) -> Counter:
    text = unicodedata.normalize("NFKC", text)
    # hyphenated line ends (pdfium marks TeX's soft hyphens as U+FFFE), joined as the parser joins them
    text = re.sub(r"(?<=[a-z])[\ufffe\u00ad\x02]\s*(?=[a-z])", "", text)
    text = re.sub(r"(?<=[a-z])-[ \t]*\r?\n\s*(?=[a-z])", "", text)
    return Counter(w.lower() for w in _WORD.findall(text))


def share(reference: Counter, found: Counter) -> float | None:
    total = sum(reference.values())
    if total == 0:
        return None
    return sum(min(n, found[w]) for w, n in reference.items()) / total


def pdfium_texts(path: Path) -> tuple[list[str], float]:
    import pypdfium2 as pdfium

    started = time.perf_counter()
    pdf = pdfium.PdfDocument(str(path))
    texts = []
    for i in range(len(pdf)):
        page = pdf[i]
        left, bottom, right, top = page.get_cropbox()
        # text inside the page box only: some PDFs carry text drawn off the page (an overflowing table
        # in debian-reference), which no reader shows and docling-parse leaves out
        texts.append(page.get_textpage().get_text_bounded(left=left, bottom=bottom, right=right, top=top))
    pdf.close()
    return texts, time.perf_counter() - started


def bench_pdf(path: Path) -> dict:
    from kb_assets.parsing import ParseOptions, parse_document

    texts, raw_s = pdfium_texts(path)
    started = time.perf_counter()
    doc = parse_document(path)
    with_images_s = time.perf_counter() - started
    started = time.perf_counter()
    parse_document(path, options=ParseOptions(images=False))
    no_images_s = time.perf_counter() - started

    shares = []
    for page, reference_text in zip(doc.pages, texts, strict=False):
        reference = words(reference_text)
        for line in page.removed:
            reference -= words(line)
        value = share(reference, words(page.text))
        if value is not None:
            shares.append((value, page.page_index))
    kinds = Counter(b.kind for p in doc.pages for b in p.blocks)
    modes = Counter(p.mode for p in doc.pages)
    n = len(texts)
    return {
        "file": path.name,
        "pages": f"{len(doc.pages)}/{n}",
        "pages_per_s": round(n / with_images_s, 1),
        "pages_per_s_no_images": round(n / no_images_s, 1),
        "pdfium_pages_per_s": round(n / raw_s, 1),
        "word_share_mean": round(100 * sum(s for s, _ in shares) / len(shares), 2),
        "word_share_min": f"{100 * min(shares)[0]:.1f}% (page {min(shares)[1] + 1})",
        "pages_ge_99": f"{sum(1 for s, _ in shares if s >= 0.99)}/{len(shares)}",
        "labels": sum(1 for p in doc.pages if p.label),
        "removed_lines": sum(len(p.removed) for p in doc.pages),
        "modes": dict(modes),
        "blocks": dict(kinds),
        "image_kb": round(sum(len(p.image_png or b"") for p in doc.pages) / 1024),
    }


def scanned_pdf(source: Path, pages: list[int], target: Path) -> list[str]:
    """An image-only PDF of the given pages rendered at 300 dpi; returns their text-layer texts."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(source))
    images, texts = [], []
    for i in pages:
        images.append(pdf[i].render(scale=300 / 72, grayscale=True).to_pil())
        texts.append(pdf[i].get_textpage().get_text_range())
    pdf.close()
    images[0].save(target, format="PDF", resolution=300, save_all=True, append_images=images[1:])
    return texts


def bench_ocr(source: Path, pages: list[int], chinese: bool = False, engine: str = "rapidocr") -> dict:
    """Recall and seconds a page (wall and CPU, all threads) of one OCR engine (``KB_OCR_ENGINE``) on
    an image-only PDF of the pages; the engine is loaded before the clock starts; the 1-minute load
    average before and after."""
    from PIL import Image

    from kb_assets.parsing import ParseOptions, parse_document
    from kb_assets.parsing.ocr import ocr_lines

    ocr_lines(Image.new("L", (200, 100), 255), engine, "eng+chi_sim")  # load the engine: not timed
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "scan.pdf"
        texts = scanned_pdf(source, pages, target)
        load_before = _load()
        started, cpu_started = time.perf_counter(), time.process_time()
        doc = parse_document(target, options=ParseOptions(ocr_engine=engine))
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        load_after = _load()
    recalls = []
    for page, reference_text in zip(doc.pages, texts, strict=False):
        if chinese:
            reference, found = Counter(_CJK.findall(reference_text)), Counter(_CJK.findall(page.text))
        else:
            reference, found = words(reference_text), words(page.text)
            for line in page.removed:
                reference -= words(line)
        value = share(reference, found)
        if value is not None:
            recalls.append(value)
    return {
        "engine": engine,
        "file": source.name,
        "pages": [p + 1 for p in pages],
        "modes": dict(Counter(p.mode for p in doc.pages)),
        "recall_mean": round(100 * sum(recalls) / max(len(recalls), 1), 1),
        "recall_min": round(100 * min(recalls or [0]), 1),
        "seconds_per_page": round(seconds / len(pages), 2),
        "cpu_seconds_per_page": round(cpu_seconds / len(pages), 2),  # all threads: less sensitive to load
        "load": f"{load_before:.2f} -> {load_after:.2f}",
    }


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def bench_html(files: list[Path]) -> dict:
    from bs4 import BeautifulSoup

    from kb_assets.parsing import parse_document

    pages = 0
    shares = []
    started = time.perf_counter()
    docs = [(f, parse_document(f)) for f in files]
    seconds = time.perf_counter() - started
    for f, doc in docs:
        pages += len(doc.pages)
        soup = BeautifulSoup(f.read_bytes(), "html.parser")
        reference = words((soup.body or soup).get_text(" "))
        value = share(reference, words("\n".join(p.text for p in doc.pages)))
        if value is not None:
            shares.append(value)
    return {
        "files": len(files),
        "logical_pages": pages,
        "pages_per_s": round(pages / seconds, 1),
        "word_share_mean": round(100 * sum(shares) / len(shares), 2),
        "word_share_min": round(100 * min(shares), 2),
        "max_page_chars": max(len(p.text) for _, d in docs for p in d.pages),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kb-assets" / "dev-corpus"))
    parser.add_argument("--ocr-pages", type=int, default=3)
    parser.add_argument("--only", help="substring of the PDF names to run (e.g. R-data)")
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    if not all((cache / f).exists() for f in PDFS):
        from dev_corpus import fetch

        fetch(cache)

    from kb_assets.parsing import parse_document

    parse_document(REPO / "examples" / "corpus" / "platform-handbook.pdf")  # docling set-up, not timed
    print("PDFs: parse_document (with page images / without) vs pypdfium2 text extraction, same run")
    for rel in PDFS:
        if args.only and args.only not in rel:
            continue
        print(bench_pdf(cache / rel), flush=True)
    from kb_assets.parsing.ocr import ENGINES, ocr_unavailable

    print("OCR (scanned renders at 300 dpi, image-only PDF), each engine installed here:")
    for engine in ENGINES:
        reason = ocr_unavailable(engine, "eng+chi_sim")
        if reason:
            print({"engine": engine, "skipped": reason}, flush=True)
            continue
        print(bench_ocr(cache / PDFS[0], list(range(8, 8 + args.ocr_pages)), engine=engine), flush=True)
        if (cache / ZH_PDF).exists():
            print(bench_ocr(cache / ZH_PDF, [10, 11], chinese=True, engine=engine), flush=True)
    if not args.only:
        print("HTML (debian-reference chapters):")
        print(bench_html(sorted(cache.glob(HTML_GLOB))), flush=True)


if __name__ == "__main__":
    main()
