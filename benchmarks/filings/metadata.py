"""Document metadata (issuer, period, kind) read as the ingest reads it, against the filings' truth.

    python benchmarks/filings/metadata.py DATA_DIR [--limit N] [--exclude-split test|none] [--split test]
        [--pages N] [--cached] [--docs doc-001,doc-002]

For every present filing of ``DATA_DIR/filings.csv`` that is not held out (``heldout.py`` refuses those
before any PDF is opened) and, by default, not of the test split's issuers (``split.json``; ``--split
test`` reads only those, once, at the end): the first ``--pages`` pages (default: all the reader reads,
``structure.metadata.READ_PAGES``) are cut into a PDF of their own and parsed by the ingest's parser
(``kb_assets.parsing.parse_document``), the PDF information is read from the whole file
(``structure.outline.read_pdf_info``), and ``structure.metadata.read_metadata`` reads the metadata: the
calls the ``pageindex_trees`` step makes. Parsed page texts are cached under ``DATA_DIR/parsed/`` (keyed
by parser version and page count), so a second run only re-reads the metadata (``--cached``: only the
filings parsed so far).

Prints accuracy per field and all three (``benchmarks/filings.py``'s comparison against ``truth.jsonl``:
issuer by name words or initials, period as fiscal year and quarter, an 8-K's as its event date), then
every miss: neutral name, field, value read, truth.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heldout import guard, is_heldout, open_pdf  # noqa: E402


def _comparison():
    """``metadata_checks`` of benchmarks/filings.py (a module beside this folder, of the same name)."""
    spec = importlib.util.spec_from_file_location("filings_benchmark", HERE.parent / "filings.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.metadata_checks


def chosen(data: Path, split: str | None, exclude: str | None, limit: int | None) -> list[dict]:
    """Truth records of the present, non-held-out filings of the chosen issuers."""
    truth = {t["doc"]: t for t in map(json.loads, (HERE / "truth.jsonl").read_text().splitlines()) if t}
    issuers = json.loads((HERE / "split.json").read_text())
    rows = []
    with open(data / "filings.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if is_heldout(row["original"]) or is_heldout(row["neutral"]) or row["present"] != "1":
                continue
            record = truth[Path(guard(row["neutral"])).stem]
            if split and record["issuer"] not in issuers[f"{split}_issuers"]:
                continue
            if exclude and record["issuer"] in issuers[f"{exclude}_issuers"]:
                continue
            rows.append(record)
    return rows[:limit] if limit else rows


def page_texts(data: Path, doc: str, pages: int) -> tuple[list[str], dict[str, str]]:
    """(texts of the first ``pages`` pages, as the ingest's parser gives them; the PDF's information)."""
    import pypdfium2 as pdfium

    from kb_assets.parsing import PARSER_VERSION, ParseOptions, parse_document
    from kb_assets.structure.outline import read_pdf_info

    source = data / "pdfs" / f"{guard(doc)}.pdf"
    cache = data / "parsed" / f"{doc}.json"
    key = f"{PARSER_VERSION}:{pages}"
    if cache.exists() and (cached := json.loads(cache.read_text())).get("key") == key:
        return cached["texts"], cached["info"]
    info = read_pdf_info(source.read_bytes())
    pdf = open_pdf(source)
    part = pdfium.PdfDocument.new()
    try:
        part.import_pages(pdf, list(range(min(pages, len(pdf)))))
        cache.parent.mkdir(exist_ok=True)
        cut = cache.with_suffix(".pdf")
        part.save(str(cut))
    finally:
        part.close()
        pdf.close()
    try:
        parsed = parse_document(cut, name=f"{doc}.pdf", options=ParseOptions(images=False))
    finally:
        cut.unlink()
    texts = [page.text for page in parsed.pages]
    cache.write_text(json.dumps({"key": key, "texts": texts, "info": info}))
    return texts, info


def main() -> None:
    from kb_assets.structure.metadata import READ_PAGES, read_metadata

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--split", choices=["dev", "test"], help="only this split's issuers")
    parser.add_argument("--exclude-split", default="test", choices=["dev", "test", "none"])
    parser.add_argument("--pages", type=int, default=READ_PAGES)
    parser.add_argument("--cached", action="store_true", help="only the filings whose pages are cached")
    parser.add_argument("--docs", help="only these filings (comma-separated neutral names)")
    args = parser.parse_args()
    exclude = None if args.exclude_split == "none" or args.split else args.exclude_split
    records = chosen(args.data, args.split, exclude, args.limit)
    if args.docs:
        records = [r for r in records if r["doc"] in args.docs.split(",")]
    if args.cached:
        records = [r for r in records if (args.data / "parsed" / f"{r['doc']}.json").exists()]
    checks_of = _comparison()
    right: Counter[str] = Counter()
    misses, failed = [], []
    started = time.perf_counter()
    for record in records:
        doc = record["doc"]
        try:
            texts, info = page_texts(args.data, doc, args.pages)
        except Exception as error:  # one unreadable filing never stops the others
            failed.append(f"  {doc}: {type(error).__name__}: {error}")
            continue
        found = read_metadata(texts, info)
        checks = checks_of(found, record)
        right.update(field for field, ok in checks.items() if ok)
        right["all"] += all(checks.values())
        period = found.get("period") or {}
        read = {
            "issuer": found.get("organisation"),
            "period": f"{period.get('label')} (end {period.get('end')})",
            "kind": found.get("kind"),
        }
        truth = {
            "issuer": record["issuer"],
            "period": f"{record['fiscal_period']} (end {record['period_end']})",
            "kind": record["kind"],
        }
        misses += [
            f"  {doc} {field}: {read[field]!r} <- truth {truth[field]!r}" for field, ok in checks.items() if not ok
        ]
    n = max(1, len(records) - len(failed))
    kinds = Counter(r["kind"] for r in records)
    print(
        f"metadata of {len(records) - len(failed)} filings ({dict(kinds)}; {len(failed)} unreadable), "
        f"first {args.pages} pages, {time.perf_counter() - started:.0f} s"
    )
    print("  " + ", ".join(f"{field} {right[field] / n:.3f}" for field in ("issuer", "period", "kind", "all")))
    print(f"misses ({len(misses)}):", *misses, sep="\n")
    if failed:
        print("unreadable:", *failed, sep="\n")


if __name__ == "__main__":
    main()
