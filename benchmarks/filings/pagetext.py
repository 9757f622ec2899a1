"""Page text of the neutral filings (pypdfium2), and the evidence-matching rules."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from heldout import open_pdf

_TRANS = str.maketrans(
    {
        "\u2019": "'",
        "\u2018": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2022": " ",
        "\ufffe": "",
        "\u00ad": "",
        "\x02": "-",
    }
)


def norm(text: str) -> str:
    """Whitespace-normalized text: NFKC (ligatures), plain quotes/dashes, one space."""
    text = unicodedata.normalize("NFKC", text).translate(_TRANS)
    return re.sub(r"\s+", " ", text).strip()


def squash(text: str) -> str:
    """norm() without any whitespace, lower case (line-break and column-gap tolerant)."""
    return re.sub(r"\s+", "", norm(text)).lower()


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+|\d[\d,.]*", norm(text).lower())


def page_texts(pdf: Path, pages: list[int] | None = None, cache_dir: Path | None = None) -> dict[int, str]:
    """{0-based page: text}; all pages when pages is None. Cached per document."""
    cache = None
    cached: dict[str, str] = {}
    if cache_dir is not None:
        cache = Path(cache_dir) / (pdf.stem + ".json")
        if cache.exists():
            cached = json.loads(cache.read_text())
    doc = None
    out = {}
    try:
        want = pages
        if want is None:
            if "n" in cached:
                want = list(range(int(cached["n"])))
            else:
                doc = open_pdf(pdf)
                want = list(range(len(doc)))
                cached["n"] = str(len(doc))
        for p in want:
            if str(p) in cached:
                out[p] = cached[str(p)]
                continue
            if doc is None:
                doc = open_pdf(pdf)
            if p >= len(doc):
                out[p] = ""
                continue
            tp = doc[p].get_textpage()
            txt = tp.get_text_range()
            tp.close()
            out[p] = cached[str(p)] = txt
    finally:
        if doc is not None:
            doc.close()
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(cached))
    return out


def exact_on_pages(quote: str, texts: list[str]) -> bool:
    """Written questions: the quote, whitespace-normalized, occurs on one of the pages
    (also accepted: the same characters with the line breaks/column gaps removed)."""
    q, qs = norm(quote), squash(quote)
    return any(q in norm(t) or qs in squash(t) for t in texts)


def coverage(quote: str, texts: list[str]) -> float:
    """FinanceBench evidence (their own extraction: other layout, words often run
    together): share of the quote's word/number tokens, reduced to letters and digits,
    that occur in the labelled pages' text reduced the same way."""
    qt = [re.sub(r"[^a-z0-9]", "", t) for t in tokens(quote)]
    qt = [t for t in qt if t]
    if not qt:
        return 1.0
    pool = "".join(re.sub(r"[^a-z0-9]", "", norm(t).lower()) for t in texts)
    return sum(1 for t in qt if t in pool) / len(qt)
