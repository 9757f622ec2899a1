"""Page summaries and keywords: title, first meaningful paragraph, TF-IDF within the document.

TF-IDF statistics come from the document's own pages, so a new document never changes another's summary.
A summary body is cached by the sha256 of its page text (``page_summaries``), so unchanged pages are not
summarized again. An optional summarizer (an OpenAI-compatible endpoint, see ``endpoint.py``) is tried
first when configured; it is best-effort: when it fails the rule-based summary is used.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from kb_assets.lib.text import sha256_text, tokenize

SUMMARY_CHARS = 200
BODY_CHARS = 165  # the rest of a rule-based summary is its keywords
RULES_SUMMARIZER = "rules-v1"


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


def summary_body(blocks: list[dict]) -> str:
    """Title (first heading) and first meaningful paragraph, at most ``BODY_CHARS`` characters."""
    heading = next((b["text"] for b in blocks if b["kind"] == "heading"), "")
    paragraph = next((b["text"] for b in blocks if b["kind"] in ("paragraph", "list") and len(b["text"]) > 40), "")
    if not paragraph:
        paragraph = next((b["text"] for b in blocks if b["kind"] != "heading"), "")
    parts = [" ".join(p.split()) for p in (heading, paragraph) if p.strip()]
    return clip(": ".join(parts), BODY_CHARS)


def with_keywords(body: str, keywords: list[str]) -> str:
    """A page summary: its body and its top keywords, at most ``SUMMARY_CHARS`` characters."""
    if keywords:
        tail = ", ".join(keywords[:4])
        body = f"{body} [{tail}]" if body else tail
    return clip(body, SUMMARY_CHARS)


def summarize(blocks: list[dict], keywords: list[str]) -> str:
    """Title (first heading) + first meaningful paragraph + keywords, at most ~200 characters."""
    return with_keywords(summary_body(blocks), keywords)


def clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, marked with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


# -- summaries of a document's pages, cached by page-text hash ----------------------------------
class PageSummarizer(Protocol):
    """An optional, best-effort summarizer of page text (e.g. an OpenAI-compatible endpoint)."""

    @property
    def summarizer_id(self) -> str: ...  # cache key part, e.g. "llm:qwen2.5-7b" (read-only)

    failure: str | None  # set after a failure: no further calls in this run

    def summarize(self, document_title: str, text: str) -> str | None: ...


@dataclass
class PageSummaries:
    pages: list[dict]  # page_index, text_sha, summary, keywords, summary_source
    new_cache: dict[str, dict[str, str]] = field(default_factory=dict)  # summarizer -> {text_sha: body}
    warnings: list[str] = field(default_factory=list)


def summarize_document(
    pages: list[dict],
    cached: dict[str, dict[str, str]],
    document_title: str = "",
    summarizer: PageSummarizer | None = None,
) -> PageSummaries:
    """Summaries and keywords of a document's pages; bodies come from ``cached`` (summarizer ->
    {page-text sha256: body}) when the page text is unchanged, else are computed (and returned in
    ``new_cache``). The optional summarizer is tried first; when it is unset or fails, the
    rule-based body is used and the document goes on."""
    keywords = document_keywords([p["text"] for p in pages])
    result = PageSummaries(pages=[])
    rules = cached.get(RULES_SUMMARIZER, {})
    model = cached.get(summarizer.summarizer_id, {}) if summarizer else {}
    for page, page_keywords in zip(pages, keywords, strict=False):
        sha = sha256_text(page["text"])
        body, source = None, RULES_SUMMARIZER
        if summarizer is not None:
            body = model.get(sha) or result.new_cache.get(summarizer.summarizer_id, {}).get(sha)
            if body is None and summarizer.failure is None and page["text"].strip():
                body = summarizer.summarize(document_title, page["text"])
                if body:
                    body = clip(body, SUMMARY_CHARS)
                    result.new_cache.setdefault(summarizer.summarizer_id, {})[sha] = body
            source = summarizer.summarizer_id if body else RULES_SUMMARIZER
        if not body:
            body = rules.get(sha) or result.new_cache.get(RULES_SUMMARIZER, {}).get(sha)
            if body is None:
                body = summary_body(page["blocks"])
                result.new_cache.setdefault(RULES_SUMMARIZER, {})[sha] = body
            summary = with_keywords(body, page_keywords)
        else:
            summary = body
        result.pages.append(
            {
                "page_index": page["page_index"],
                "text_sha": sha,
                "summary": summary,
                "keywords": page_keywords,
                "summary_source": source,
            }
        )
    if summarizer is not None and summarizer.failure:
        result.warnings.append(
            f"page summarizer {summarizer.summarizer_id} skipped: {summarizer.failure}; rule-based summaries used"
        )
    return result
