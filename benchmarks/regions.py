"""Chunk regions against an independent extraction: for each PDF (default: R-data, R-admin and
R-lang from Debian's r-doc-pdf, under corpus-cache/), parse and chunk it as ingest does, then align
every chunk's words to pypdfium2's word boxes and print the share that falls inside the chunk's
regions (mean over chunks, minimum), how many chunks have no region and how many lie outside their
page. Targets (issue 14): mean >= 0.95, no chunk under 0.7, none outside.

    .venv/bin/python benchmarks/regions.py [PDF ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MANUALS = REPO / "corpus-cache" / "usr" / "share" / "R" / "doc" / "manual"
DEFAULT = [MANUALS / f"{name}.pdf" for name in ("R-data", "R-admin", "R-lang")]


def chunk_pdf(path: Path, model) -> list[dict]:
    """Chunk rows of a PDF as the pipeline makes them (parse -> pages -> content-aware chunks)."""
    import dataclasses

    from kb_assets.chunking.chunker import DocumentContext, chunk_document
    from kb_assets.parsing import ParseOptions, parse_document

    parsed = parse_document(path, options=ParseOptions(images=False))
    pages = [
        {
            "page_index": p.page_index,
            "page_label": p.label,
            "text": p.text,
            "blocks": [
                {k: v for k, v in dataclasses.asdict(b).items() if v is not None and k != "image_png"} for b in p.blocks
            ],
        }
        for p in parsed.pages
    ]
    context = DocumentContext(
        document_id="bench",
        knowledge_base_id="bench",
        version="v",
        title=parsed.title,
        source_uri=str(path),
        source_kind="pdf",
        mime="application/pdf",
        run_id="bench",
    )
    return chunk_document(pages, context, model.count_tokens, model.max_tokens).to_dicts()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdfs", nargs="*", type=Path, default=DEFAULT)
    args = parser.parse_args()
    from kb_assets.lib.machine import use_offline_model_libraries
    from kb_assets.settings import Settings
    from kb_assets.stores.models import load_model
    from kb_assets_tests.region_check import measure

    use_offline_model_libraries()
    model = load_model(Settings.from_env().embedding_model)
    ok = True
    for path in args.pdfs:
        if not path.exists():
            print(f"{path}: missing (Debian's r-doc-pdf unpacked under corpus-cache/)")
            ok = False
            continue
        started = time.perf_counter()
        chunks = chunk_pdf(path, model)
        result = measure(path, chunks)
        passed = result["mean"] >= 0.95 and result["min"] >= 0.7 and not result["outside_page"]
        ok &= passed
        print(
            f"{path.name}: {result['chunks']} chunks ({result['scored']} aligned), mean {result['mean']:.3f}, "
            f"min {result['min']:.3f}, without regions {result['without_regions']}, outside their page "
            f"{result['outside_page']}  [{'ok' if passed else 'FAIL'}]  {time.perf_counter() - started:.1f} s"
        )
        print(
            f"    control: against the regions of the chunk 3 before, mean {result['control_mean']:.3f}; "
            f"a region covers {result['area_share']:.1%} of its page on average"
        )
        for score, page, text in result["worst"][:3]:
            print(f"    worst {score:.3f} page {page + 1}: {text!r}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
