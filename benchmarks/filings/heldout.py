"""Held-out guard for the filings benchmark.

The filings named in shared/eval/heldout-filings.txt are the outside check of the
filings issue: they must never be opened, ingested, or have their questions read.
Every script in this folder goes through this module before touching a FinanceBench
document name, PDF or question.
"""

from __future__ import annotations

import os
from pathlib import Path

_CANDIDATES = [
    os.environ.get("KB_HELDOUT_FILINGS", ""),
    str(Path(__file__).resolve().parents[2] / "shared" / "eval" / "heldout-filings.txt"),
    "/work/shared/eval/heldout-filings.txt",
]


def _load() -> frozenset[str]:
    for cand in _CANDIDATES:
        if cand and Path(cand).is_file():
            names = set()
            for line in Path(cand).read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    names.add(_norm(line))
            if not names:
                raise SystemExit(f"held-out list {cand} is empty; refusing to continue")
            return frozenset(names)
    raise SystemExit(
        "held-out list (shared/eval/heldout-filings.txt) not found; "
        "set KB_HELDOUT_FILINGS. Refusing to continue without it."
    )


def _norm(name: str) -> str:
    name = os.path.basename(name.strip())
    if name.lower().endswith(".pdf"):
        name = name[:-4]
    return name.lower()


HELDOUT = _load()


def is_heldout(doc_name: str) -> bool:
    """True for any spelling (case, .pdf suffix, path) of a held-out filing."""
    return _norm(doc_name) in HELDOUT


def guard(doc_name: str) -> str:
    """Return doc_name, or raise if it names a held-out filing."""
    if is_heldout(doc_name):
        raise PermissionError(f"refusing to touch held-out filing {doc_name!r}")
    return doc_name


def open_pdf(path: str | Path):
    """Open a PDF with pypdfium2 after checking it is not held out."""
    guard(str(path))
    import pypdfium2 as pdfium

    return pdfium.PdfDocument(str(path))


def _loose(name: str) -> str:
    """Name with the '8K_dated-' spelling variants folded, for look-alike detection."""
    n = _norm(name)
    return n.replace("dated-", "").replace("dated_", "")


def select_filings(tree: list[tuple[str, str]], described: set[str]) -> list[str]:
    """Choose the usable FinanceBench filings.

    tree: (original name without .pdf, git blob sha) for every pdfs/*.pdf of the repo
    (from `git ls-tree`, which reads no file content). described: names listed in
    data/financebench_document_information.jsonl.
    Drops held-out filings, any file byte-identical (same blob) to a held-out one or
    whose name differs from a held-out name only by the 'dated-' spelling, and keeps one
    copy of other byte-identical duplicates (the described name, else the first sorted).
    Returns the kept names sorted; their order defines doc-001, doc-002, ...
    """
    held_blobs = {sha for name, sha in tree if is_heldout(name)}
    held_loose = {_loose(h) for h in HELDOUT}
    by_blob: dict[str, list[str]] = {}
    for name, sha in tree:
        if is_heldout(name) or sha in held_blobs or _loose(name) in held_loose:
            continue
        by_blob.setdefault(sha, []).append(name)
    kept = []
    for names in by_blob.values():
        names = sorted(names)
        pref = [n for n in names if n in described]
        kept.append(pref[0] if pref else names[0])
    return sorted(kept)
