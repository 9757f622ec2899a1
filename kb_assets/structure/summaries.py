"""Rule-based page summaries and keywords: title, first meaningful paragraph, TF-IDF within the document.

TF-IDF statistics come from the document's own pages, so a new document never changes another's summary.
"""

from __future__ import annotations

import math
import re
from collections import Counter

SUMMARY_CHARS = 200
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{2,}|[\u3400-\u9fff]{2,}")
_STOPWORDS = set("""the and for are but not you all any can had her was one our out has his how its may new now
 old see two who did get let put say she too use with this that from they will would there their what when
 which were been have into than then them these those each other some such only also more most very just
 over under about after before between through during without within upon your yours page""".split())


def tokenize(text: str) -> list[str]:
    """Words for keywords: English words (lowercased, no stopwords) and jieba words for Chinese."""
    words = []
    for match in _WORD.finditer(text):
        token = match.group(0)
        if token[0].isascii():
            token = token.lower()
            if token not in _STOPWORDS:
                words.append(token)
        else:
            words.extend(w for w in _jieba_cut(token) if len(w) >= 2)
    return words


def _jieba_cut(text: str) -> list[str]:
    import jieba

    jieba.setLogLevel(60)
    return list(jieba.cut(text))


def document_keywords(page_texts: list[str], top: int = 8) -> list[list[str]]:
    """Top TF-IDF keywords of each page, with document frequency counted over the document's pages."""
    tokenized = [tokenize(text) for text in page_texts]
    doc_freq = Counter(word for words in tokenized for word in set(words))
    n_pages = max(1, len(page_texts))
    keywords = []
    for words in tokenized:
        counts = Counter(words)
        scored = sorted(counts, key=lambda w: (-counts[w] * math.log(1 + n_pages / doc_freq[w]), w))
        keywords.append(scored[:top])
    return keywords


def summarize(blocks: list[dict], keywords: list[str]) -> str:
    """Title (first heading) + first meaningful paragraph + keywords, at most ~200 characters."""
    heading = next((b["text"] for b in blocks if b["kind"] == "heading"), "")
    paragraph = next((b["text"] for b in blocks if b["kind"] in ("paragraph", "list") and len(b["text"]) > 40), "")
    if not paragraph:
        paragraph = next((b["text"] for b in blocks if b["kind"] != "heading"), "")
    parts = [p for p in (heading, " ".join(paragraph.split())) if p]
    summary = ": ".join(parts)
    if len(summary) > SUMMARY_CHARS - 30:
        summary = summary[: SUMMARY_CHARS - 31].rstrip() + "…"
    if keywords:
        summary = f"{summary} [{', '.join(keywords[:4])}]" if summary else ", ".join(keywords[:4])
    return summary[:SUMMARY_CHARS]
